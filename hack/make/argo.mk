# The Argo face (plugin/argo): its end-to-end tests run Argo's own workflow-controller and
# `argoexec agent`, built once from the pinned module into the cache (hack/build-argo.sh), with
# Argo's minimal CRDs copied beside them.
ARGO_VERSION ?= v3.7.3
export ARGO_ASSETS := $(CACHE_DIR)/argo/$(ARGO_VERSION)

TEST_ASSETS += argo-binaries

.PHONY: argo-binaries
argo-binaries: ## Argo's workflow-controller and argoexec, for test/e2e/argo
	bash hack/build-argo.sh "$(ARGO_ASSETS)" $(ARGO_VERSION)
