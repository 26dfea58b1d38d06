#!/usr/bin/env bash
# Builds Tekton's pipelines controller (cmd/controller) from the pinned Go module into a cache
# directory outside the repo, for the end-to-end tests of the Tekton face (test/e2e/tekton).
# Usage: hack/build-tekton.sh DIR VERSION
# Returns at once when DIR/tekton-controller exists. Tekton source is never copied into the repo:
# the build runs in a throwaway module in a temporary directory (docs/testing.md, "Where everything
# comes from").
set -euo pipefail

dir=${1:?usage: build-tekton.sh DIR VERSION}
version=${2:?usage: build-tekton.sh DIR VERSION}
bin="$dir/tekton-controller"

if [[ -x "$bin" ]]; then
	exit 0
fi

export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "building Tekton pipelines controller $version into $dir (about 4 minutes on 2 cores)" >&2
cd "$tmp"
go mod init local/tekton 2>/dev/null
gomod=$(go mod download -json "github.com/tektoncd/pipeline@$version" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
# Tekton pins two AWS SDK modules with a replace block; keep the pins.
awk '/^replace \(/{p=1} p{print} p&&/^\)/{p=0}' "$gomod" >>go.mod
go get "github.com/tektoncd/pipeline/cmd/controller@$version" >/dev/null
mkdir -p "$dir"
go build -trimpath -ldflags "-s -w" -o "$tmp/tekton-controller" github.com/tektoncd/pipeline/cmd/controller
mv "$tmp/tekton-controller" "$bin"
echo "built $bin" >&2
