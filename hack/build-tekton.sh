#!/usr/bin/env bash
# Builds Tekton's pipelines controller (cmd/controller) from the pinned Go module into a cache
# directory outside the repo, for the end-to-end tests of the Tekton face (test/e2e/tekton), and
# its entrypoint (cmd/entrypoint: what a TaskRun pod's init container copies into the pod and
# every step runs under; test/realstack/tekton runs TaskRun pods with it), and
# copies that release's CRDs, namespace and config-*.yaml ConfigMaps (feature flags among them)
# beside it, so the harness runs the controller with its own release's config
# (test/internal/tektonharness).
# Usage: hack/build-tekton.sh DIR VERSION
# Returns at once when DIR/tekton-controller, DIR/tekton-entrypoint and DIR/config exist; what
# is missing (a cache from before the config or the entrypoint was added) is made alone. Tekton
# source is never copied into the repo: the build runs in a throwaway module in a temporary
# directory (docs/testing.md, "Where everything comes from").
set -euo pipefail

dir=${1:?usage: build-tekton.sh DIR VERSION}
version=${2:?usage: build-tekton.sh DIR VERSION}
bin="$dir/tekton-controller"
entrypoint="$dir/tekton-entrypoint"

if [[ -x "$bin" && -x "$entrypoint" && -d "$dir/config" ]]; then
	exit 0
fi

# No debug information is compiled: every binary here is linked stripped (-s -w), and compiling
# without it takes about 11% less CPU (the Makefile's GOFLAGS says more).
export GOTOOLCHAIN=local GOFLAGS="-buildvcs=false -gcflags=all=-dwarf=false"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cd "$tmp"
go mod init local/tekton 2>/dev/null
info=$(go mod download -json "github.com/tektoncd/pipeline@$version")
gomod=$(sed -n 's/.*"GoMod": "\(.*\)",/\1/p' <<<"$info")
src=$(sed -n 's/.*"Dir": "\(.*\)",/\1/p' <<<"$info")

mkdir -p "$dir/config.tmp"
cp -r "$src/config/100-namespace" "$src/config/300-crds" "$dir/config.tmp/"
cp "$src"/config/config-*.yaml "$dir/config.tmp/"
chmod -R u+w "$dir/config.tmp"
rm -rf "$dir/config"
mv "$dir/config.tmp" "$dir/config"
if [[ -x "$bin" && -x "$entrypoint" ]]; then
	exit 0
fi

# Tekton pins two AWS SDK modules with a replace block (up to v1.x); keep the pins.
awk '/^replace \(/{p=1} p{print} p&&/^\)/{p=0}' "$gomod" >>go.mod
go get "github.com/tektoncd/pipeline/cmd/controller@$version" "github.com/tektoncd/pipeline/cmd/entrypoint@$version" >/dev/null
if [[ ! -x "$bin" ]]; then
	echo "building Tekton pipelines controller $version into $dir (about 4 minutes on 2 cores)" >&2
	go build -trimpath -ldflags "-s -w" -o "$tmp/tekton-controller" github.com/tektoncd/pipeline/cmd/controller
	mv "$tmp/tekton-controller" "$bin"
	echo "built $bin" >&2
fi
# The entrypoint shares most of its packages with the controller, built just before with the same
# settings, so most of it comes from the build cache.
echo "building Tekton entrypoint $version into $dir" >&2
go build -trimpath -ldflags "-s -w" -o "$tmp/tekton-entrypoint" github.com/tektoncd/pipeline/cmd/entrypoint
mv "$tmp/tekton-entrypoint" "$entrypoint"
echo "built $entrypoint" >&2
