#!/usr/bin/env bash
# Builds the non-Kubernetes parts of the "real stack" test bed (test/internal/realstack) from pinned
# Go modules into a cache directory outside the repo, and copies the upstream manifests the tests
# apply (CRDs, webhook configurations, runtimes, kwok stages) beside them.
# Usage: hack/build-realstack.sh DIR
# Result: DIR/{trainer-controller-manager,jobset-manager,kwok} and DIR/manifests/... Re-runs are no-ops.
# kube-apiserver, etcd, kube-controller-manager and kube-scheduler come from hack/build-control-plane.sh.
#
# Upstream source is never copied into the repo: everything is built from the module cache in
# temporary directories. docs/testing.md ("The real Trainer stack") says what is built and the
# traps this script handles.
set -euo pipefail

dir=${1:?usage: build-realstack.sh DIR}
TRAINER_VERSION=${TRAINER_VERSION:-v2.3.0}
JOBSET_VERSION=${JOBSET_VERSION:-v0.12.0}
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}

# No debug information is compiled: every binary here is linked stripped (-s -w), and compiling
# without it takes about 11% less CPU (the Makefile's GOFLAGS says more).
export GOTOOLCHAIN=local GOFLAGS="-buildvcs=false -gcflags=all=-dwarf=false"
mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT

moddir() { go mod download -json "$1" | sed -n 's/.*"Dir": "\(.*\)",/\1/p'; }

# Builds the main package at $2 (relative to the module root) of module $1 in a writable copy of the
# module, with the module's own go.mod and go.sum. `go install mod@version` is refused for JobSet
# (it asks the proxy for the version list), so all three are built the same way.
build() {
	local mod=$1 pkg=$2 out=$3
	if [[ -x "$dir/$out" ]]; then return 0; fi
	local src start=$SECONDS
	src=$(moddir "$mod")
	echo "building $out from $mod" >&2
	cp -r "$src" "$tmp/$out-src"
	chmod -R u+w "$tmp/$out-src"
	(cd "$tmp/$out-src" && go build -trimpath -ldflags "-s -w" -o "$dir/$out.tmp" "$pkg")
	mv "$dir/$out.tmp" "$dir/$out"
	echo "built $dir/$out in $((SECONDS - start)) s" >&2
}

# build_together builds the three in one module and one `go build`: releases of one Kubernetes
# minor share client-go, apiserver, controller-runtime and JobSet's API, so those compile once
# instead of three times (a third of a cold build; docs/testing.md). Minimal version selection
# moves each to the newest patch the other two require (Trainer v2.3.0's k8s.io v0.36.2 instead of
# JobSet v0.12.0's v0.36.0): the same release's code on the same Kubernetes minor. A combination
# that does not build that way (releases of different minors, as in some rows of make
# test-compat) is built the slow way, each in its own module.
build_together() {
	local start=$SECONDS m=$tmp/together
	mkdir -p "$m/bin"
	echo "building trainer-controller-manager, jobset-manager and kwok in one module" >&2
	(
		cd "$m"
		go mod init local/realstack >/dev/null 2>&1
		go get "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager@$TRAINER_VERSION" \
			"sigs.k8s.io/jobset@$JOBSET_VERSION" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" >get.log 2>&1 || { cat get.log >&2; exit 1; }
		go build -trimpath -ldflags "-s -w" -o bin/ \
			github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager sigs.k8s.io/jobset sigs.k8s.io/kwok/cmd/kwok
	) || return 1
	mv "$m/bin/trainer-controller-manager" "$dir/trainer-controller-manager"
	mv "$m/bin/jobset" "$dir/jobset-manager"
	mv "$m/bin/kwok" "$dir/kwok"
	echo "built $dir/{trainer-controller-manager,jobset-manager,kwok} in $((SECONDS - start)) s" >&2
}

if [[ ! -x "$dir/trainer-controller-manager" && ! -x "$dir/jobset-manager" && ! -x "$dir/kwok" ]]; then
	build_together || echo "these releases do not build in one module; building each in its own" >&2
fi
build "github.com/kubeflow/trainer/v2@$TRAINER_VERSION" ./cmd/trainer-controller-manager trainer-controller-manager
build "sigs.k8s.io/jobset@$JOBSET_VERSION" . jobset-manager
build "sigs.k8s.io/kwok@$KWOK_VERSION" ./cmd/kwok kwok

# Manifests, copied as they are in the modules (the harness rewrites webhook clientConfigs at run time).
m=$dir/manifests
# .done-2 marks the layout with the release's version files (an older cache directory is redone).
if [[ ! -f "$m/.done-2" ]]; then
	rm -rf "$m"
	mkdir -p "$m/trainer/crds" "$m/trainer/runtimes" "$m/jobset/crds" "$m/kwok/stages"
	t=$(moddir "github.com/kubeflow/trainer/v2@$TRAINER_VERSION")
	j=$(moddir "sigs.k8s.io/jobset@$JOBSET_VERSION")
	k=$(moddir "sigs.k8s.io/kwok@$KWOK_VERSION")
	cp "$t"/manifests/base/crds/trainer.kubeflow.org_*.yaml "$m/trainer/crds/"
	cp "$t/manifests/base/webhook/manifests.yaml" "$m/trainer/webhooks.yaml"
	# Trainer v2.0.x has no Configuration file: its manager takes flags (the harness starts it so).
	if [[ -f "$t/manifests/base/manager/controller_manager_config.yaml" ]]; then
		cp "$t/manifests/base/manager/controller_manager_config.yaml" "$m/trainer/controller_manager_config.yaml"
	fi
	cp "$t"/manifests/base/runtimes/*_distributed.yaml "$m/trainer/runtimes/"
	cp "$t"/manifests/base/runtimes/torchtune/llama3_2/*.yaml "$m/trainer/runtimes/"
	cp "$j"/config/components/crd/bases/*.yaml "$m/jobset/crds/"
	cp "$j/config/components/webhook/manifests.yaml" "$m/jobset/webhooks.yaml"
	cp "$j/config/components/manager/controller_manager_config.yaml" "$m/jobset/controller_manager_config.yaml"
	cp "$k/kustomize/stage/node/fast/node-initialize.yaml" "$k/kustomize/stage/node/heartbeat/node-heartbeat.yaml" "$m/kwok/stages/"
	for s in pod-create pod-ready pod-complete pod-delete; do
		cp "$k/kustomize/stage/pod/general/$s.yaml" "$m/kwok/stages/"
	done
	echo "$TRAINER_VERSION" >"$m/trainer/version"
	echo "$JOBSET_VERSION" >"$m/jobset/version"
	chmod -R u+w "$m"
	touch "$m/.done-2"
fi
echo "real stack assets in $dir" >&2
