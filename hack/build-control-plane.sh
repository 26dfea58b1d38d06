#!/usr/bin/env bash
# Build kube-apiserver + etcd (+ optional extra k8s commands) from the Go module proxy.
# usage: build-control-plane.sh DEST_DIR K8S_VERSION [EXTRA_CMD...]
#   e.g. build-control-plane.sh ~/.cache/trainstep/k8s/v1.36.3 1.36.3 kube-controller-manager
# Result: DEST_DIR/{kube-apiserver,etcd,...}, usable as KUBEBUILDER_ASSETS. Re-runs are no-ops.
#
# No prebuilt binaries can be downloaded here (only the Go module proxy is reachable), so the
# control plane is compiled from k8s.io/kubernetes in a throwaway module. About 5 min cold on 2 cores.
set -euo pipefail
DEST=${1:?dest dir}; KV=${2:?k8s version like 1.36.3}; shift 2; EXTRA=("$@")
ok=1; for b in kube-apiserver etcd "${EXTRA[@]}"; do [ -x "$DEST/$b" ] || ok=0; done
if [ $ok = 1 ]; then echo "control plane cached in $DEST"; exit 0; fi
echo "building kube-apiserver $KV, etcd ${EXTRA[*]} into $DEST (about 5 minutes the first time)"
MINOR=${KV#1.}; MINOR=${MINOR%%.*}; SV=0.${KV#1.}          # 1.36.3 -> staging v0.36.3
W=$(mktemp -d /tmp/k8s-build.XXXXXX); trap 'rm -rf "$W"' EXIT
cd "$W"
# No debug information is compiled: every binary here is linked stripped (-s -w), and compiling
# without it takes about 11% less CPU (the Makefile's GOFLAGS says more).
export GOTOOLCHAIN=local GOFLAGS="-buildvcs=false -gcflags=all=-dwarf=false"
go mod init local/k8sbuild >/dev/null 2>&1
KMOD=$(go mod download -json "k8s.io/kubernetes@v$KV" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
EV=$(awk '$1=="go.etcd.io/etcd/server/v3"{print $2}' "$KMOD")   # the etcd kubernetes itself pins
{
  echo "require ("; echo "	k8s.io/kubernetes v$KV"; echo "	go.etcd.io/etcd/server/v3 $EV"; echo ")"
  echo "replace ("
  # k8s.io/kubernetes replaces every staging module with ./staging/...; point each at its published tag.
  awk '/^replace \(/{p=1;next} p&&/^\)/{p=0} p&&$1~/^k8s.io\//{print "\t"$1" => "$1" v'"$SV"'"}' "$KMOD"
  echo ")"
} >> go.mod
PKGS=("k8s.io/kubernetes/cmd/kube-apiserver@v$KV" "go.etcd.io/etcd/server/v3@$EV")
for c in "${EXTRA[@]}"; do PKGS+=("k8s.io/kubernetes/cmd/$c@v$KV"); done
# Explicit @versions: a bare package path means @upgrade (the newest k8s.io/kubernetes) and breaks the pins.
go get "${PKGS[@]}" 2>&1 | grep -v '^go: \(downloading\|upgraded\|added\)' || true
grep -q "k8s.io/kubernetes v$KV\b" go.mod || { echo "k8s.io/kubernetes version drifted:"; cat go.mod; exit 1; }
# Without these the server reports v0.0.0-master and version checks (Tekton's) refuse it.
V=k8s.io/component-base/version; C=k8s.io/client-go/pkg/version
LDF="-s -w -X $V.gitVersion=v$KV -X $V.gitMajor=1 -X $V.gitMinor=$MINOR -X $V.gitTreeState=clean -X $C.gitVersion=v$KV -X $C.gitMajor=1 -X $C.gitMinor=$MINOR -X $C.gitTreeState=clean"
mkdir -p "$DEST"
# Each binary already there is kept: adding an extra (kube-scheduler for test/realstack) builds only it.
[ -x "$DEST/kube-apiserver" ] || { go build -ldflags "$LDF" -o "$DEST/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver && mv "$DEST/kube-apiserver.tmp" "$DEST/kube-apiserver"; }
[ -x "$DEST/etcd" ] || { go build -ldflags "-s -w" -o "$DEST/etcd.tmp" go.etcd.io/etcd/server/v3 && mv "$DEST/etcd.tmp" "$DEST/etcd"; }
for c in "${EXTRA[@]}"; do [ -x "$DEST/$c" ] || { go build -ldflags "$LDF" -o "$DEST/$c.tmp" "k8s.io/kubernetes/cmd/$c" && mv "$DEST/$c.tmp" "$DEST/$c"; }; done
# sed, not head: head exits after its line, etcd then dies of SIGPIPE on the next, and pipefail
# fails the build (seen on a loaded machine: make's Error 141).
"$DEST/kube-apiserver" --version; "$DEST/etcd" --version | sed -n 1p
