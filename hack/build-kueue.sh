#!/usr/bin/env bash
# Builds the Kueue manager for the real stack's Kueue option (test/internal/realstack/kueue.go) from
# the pinned module sigs.k8s.io/kueue into a cache directory outside the repo, and copies the
# module's CRDs, webhook configurations and manager Configuration beside it.
# Usage: hack/build-kueue.sh DIR
# Result: DIR/kueue-manager and DIR/manifests/{crds/*.yaml,webhooks.yaml,controller_manager_config.yaml}.
# Re-runs are no-ops.
#
# Kueue is built as its own module, from its own go.mod and go.sum (v0.17.0 requires Trainer API
# v2.2.0 and JobSet v0.11.1, older than the stack's Trainer v2.3.0 and JobSet v0.12.0: the TrainJob
# fields Kueue reads are the same in both). Cold (empty build cache, modules downloaded): about
# 6 min on 2 cores; see docs/testing.md.
set -euo pipefail

dir=${1:?usage: build-kueue.sh DIR}
KUEUE_VERSION=${KUEUE_VERSION:-v0.17.0}

# No debug information is compiled: every binary here is linked stripped (-s -w), and compiling
# without it takes about 11% less CPU (the Makefile's GOFLAGS says more).
export GOTOOLCHAIN=local GOFLAGS="-buildvcs=false -gcflags=all=-dwarf=false"
mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT

src=$(go mod download -json "sigs.k8s.io/kueue@$KUEUE_VERSION" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
if [[ ! -x "$dir/kueue-manager" ]]; then
	start=$SECONDS
	echo "building kueue-manager from sigs.k8s.io/kueue@$KUEUE_VERSION" >&2
	cp -r "$src" "$tmp/kueue-src"
	chmod -R u+w "$tmp/kueue-src"
	# The one change: with internalCertManagement off, v0.17.0's main.go reads the metrics
	# server's certificate from a fixed /etc/kueue/metrics/certs (a mounted Secret in its Deployment)
	# and exits without it, even with metrics off. KUEUE_METRICS_CERT_DIR overrides the directory.
	main=$tmp/kueue-src/cmd/kueue/main.go
	fixed='metricsCertPath := "/etc/kueue/metrics/certs"'
	grep -qF "$fixed" "$main" || { echo "build-kueue.sh: $main no longer has: $fixed" >&2; exit 1; }
	sed -i "s|$fixed|&; if d := os.Getenv(\"KUEUE_METRICS_CERT_DIR\"); d != \"\" { metricsCertPath = d }|" "$main"
	(cd "$tmp/kueue-src" && go build -trimpath -ldflags "-s -w" -o "$dir/kueue-manager.tmp" ./cmd/kueue)
	mv "$dir/kueue-manager.tmp" "$dir/kueue-manager"
	echo "built $dir/kueue-manager in $((SECONDS - start)) s" >&2
fi

m=$dir/manifests
if [[ ! -f "$m/.done" ]]; then
	rm -rf "$m"
	mkdir -p "$m/crds"
	cp "$src"/config/components/crd/bases/*.yaml "$m/crds/"
	cp "$src/config/components/webhook/manifests.yaml" "$m/webhooks.yaml"
	cp "$src/config/components/manager/controller_manager_config.yaml" "$m/controller_manager_config.yaml"
	chmod -R u+w "$m"
	touch "$m/.done"
fi
echo "kueue assets in $dir" >&2
