# The real stack's Kueue option (test/internal/realstack/kueue.go): the real Kueue manager, built
# once from the pinned module as its own module (hack/build-kueue.sh), with its CRDs, webhook
# configurations and manager Configuration copied beside it. Cold, about 5 min on 2 cores (its
# k8s 0.35 modules are not shared with the rest of the bed); skipped in 0 s once cached.
KUEUE_VERSION ?= v0.17.0
# realstack.DefaultKueueVersion names the same directory, for `go test` without make.
export KUEUE_ASSETS := $(CACHE_DIR)/kueue/$(KUEUE_VERSION)

TEST_ASSETS += kueue-binaries

.PHONY: kueue-binaries
kueue-binaries: ## the Kueue manager, for the real stack's Kueue suites
	KUEUE_VERSION=$(KUEUE_VERSION) bash hack/build-kueue.sh "$(KUEUE_ASSETS)"

# The conformance suite and test/realstack/multikueue start Kueue.
test-realstack: kueue-binaries
