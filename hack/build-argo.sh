#!/usr/bin/env bash
# Builds Argo's workflow-controller and argoexec from the pinned Go module into a cache directory
# outside the repo, for the end-to-end tests of the Argo face (test/e2e/argo).
# Usage: hack/build-argo.sh DIR VERSION
# Returns at once when both binaries exist in DIR. Argo source is never copied into the repo: the
# build runs in a throwaway module in a temporary directory (docs/testing.md, "Where everything
# comes from", has the symlink trap below). Any release from v3.6 on builds: the module path
# follows the major version (github.com/argoproj/argo-workflows/v4 from v4.0 on).
#
# argoexec v3.7.x and v4.x do not build from the module zip: workflow/executor/osspecific/
# signal_linux.go (os-specific/ in v3.6) is a symlink to signal_darwin.go in Argo's repository and
# module zips drop symlinks. The file is restored in a temporary copy of the module, which a
# replace directive points at.
set -euo pipefail

dir=${1:?usage: build-argo.sh DIR VERSION}
version=${2:?usage: build-argo.sh DIR VERSION}

if [[ -x "$dir/workflow-controller" && -x "$dir/argoexec" && -d "$dir/crds" ]]; then
	exit 0
fi

# No debug information is compiled: every binary here is linked stripped (-s -w), and compiling
# without it takes about 11% less CPU (the Makefile's GOFLAGS says more).
export GOTOOLCHAIN=local GOFLAGS="-buildvcs=false -gcflags=all=-dwarf=false"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

major=${version%%.*}
case "$major" in
v3 | v4) mod=github.com/argoproj/argo-workflows/$major ;;
*)
	echo "build-argo.sh: no Argo module path known for $version (v3.x and v4.x are)" >&2
	exit 1
	;;
esac
echo "building Argo workflow-controller and argoexec $version into $dir (about 4 minutes on 2 cores)" >&2
cd "$tmp"
go mod init local/argo >/dev/null 2>&1
# Argo pins some modules with replace directives (tablewriter in v3.7); keep its pins, whatever
# the release: a replace in a dependency's go.mod is ignored, so it is copied into ours.
gomod=$(go mod download -json "$mod@$version" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
awk '/^replace \(/{p=1} p{print} p&&/^\)/{p=0; next} !p&&/^replace [^(]/{print}' "$gomod" >>go.mod
go get "$mod/cmd/workflow-controller@$version" "$mod/cmd/argoexec@$version" >/dev/null 2>&1
src=$(go list -m -f '{{.Dir}}' "$mod")

cp -r "$src" argo-src
chmod -R u+w argo-src
for osdir in argo-src/workflow/executor/osspecific argo-src/workflow/executor/os-specific; do
	if [[ -d "$osdir" && ! -e "$osdir/signal_linux.go" ]]; then
		cp "$osdir/signal_darwin.go" "$osdir/signal_linux.go"
	fi
done
go mod edit -replace "$mod=./argo-src"

go build -trimpath -ldflags "-s -w" -o "$tmp/workflow-controller" "$mod/cmd/workflow-controller"
go build -trimpath -ldflags "-s -w" -o "$tmp/argoexec" "$mod/cmd/argoexec"

mkdir -p "$dir/crds"
cp argo-src/manifests/base/crds/minimal/*.yaml "$dir/crds/"
rm -f "$dir/crds/kustomization.yaml"
mv "$tmp/workflow-controller" "$tmp/argoexec" "$dir/"
echo "built $dir/workflow-controller and $dir/argoexec" >&2
