# The real-stack test bed (test/internal/realstack, tests in test/realstack): the real Kubeflow
# Trainer and JobSet managers, kube-scheduler and kwok, built once from pinned modules into the
# cache (hack/build-realstack.sh), with the upstream CRDs, webhook configurations, runtimes and
# kwok stages copied beside them. kube-scheduler is built with the control plane.
REALSTACK_TRAINER ?= v2.3.0
REALSTACK_JOBSET  ?= v0.12.0
REALSTACK_KWOK    ?= v0.8.0
# realstack.DefaultAssetsName names the same directory, for `go test` without make.
export REALSTACK_ASSETS := $(CACHE_DIR)/realstack/trainer-$(REALSTACK_TRAINER)-jobset-$(REALSTACK_JOBSET)-kwok-$(REALSTACK_KWOK)

TEST_ASSETS += realstack-binaries

.PHONY: realstack-binaries test-realstack
realstack-binaries: ## Trainer, JobSet and kwok, for test/realstack (kube-scheduler: make control-plane)
	TRAINER_VERSION=$(REALSTACK_TRAINER) JOBSET_VERSION=$(REALSTACK_JOBSET) KWOK_VERSION=$(REALSTACK_KWOK) \
		bash hack/build-realstack.sh "$(REALSTACK_ASSETS)"

test-realstack: build control-plane realstack-binaries ## only the real-stack suite
	go test -count=1 -timeout 20m ./test/realstack/...
