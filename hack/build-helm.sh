#!/usr/bin/env bash
# Builds the helm binary from its pinned Go module into a cache directory outside the repo, for
# test/e2e/image (the chart rendered by the real helm). Re-runs are no-ops.
# Usage: hack/build-helm.sh DIR VERSION      Result: DIR/helm
#
# Built in a copy of the module with its own go.mod and go.sum (helm's dependency graph, Kubernetes
# libraries among them, stays out of trainstep's go.mod), as hack/build-realstack.sh builds the
# Trainer. The version is linked in as helm's Makefile does, so `helm version` names it.
set -euo pipefail

dir=${1:?usage: build-helm.sh DIR VERSION}
version=${2:?usage: build-helm.sh DIR VERSION}
if [[ -x "$dir/helm" ]]; then exit 0; fi

# No debug information is compiled: every binary here is linked stripped (-s -w), and compiling
# without it takes about 11% less CPU (the Makefile's GOFLAGS says more).
export GOTOOLCHAIN=local GOFLAGS="-buildvcs=false -gcflags=all=-dwarf=false"
mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT

start=$SECONDS
src=$(go mod download -json "helm.sh/helm/v4@$version" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
echo "building helm $version from $src" >&2
cp -r "$src" "$tmp/helm"
chmod -R u+w "$tmp/helm"
(cd "$tmp/helm" && CGO_ENABLED=0 go build -trimpath \
	-ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$version" -o "$dir/helm.tmp" ./cmd/helm)
mv "$dir/helm.tmp" "$dir/helm"
echo "built $dir/helm in $((SECONDS - start)) s" >&2
