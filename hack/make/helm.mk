# helm, for test/e2e/image: the chart (charts/trainstep) is linted, rendered and installed by the
# real helm and checked against kustomize's build of manifests/. Built once from the pinned module
# into the cache (hack/build-helm.sh).
HELM_VERSION ?= v4.3.2
export HELM_ASSETS := $(CACHE_DIR)/helm/$(HELM_VERSION)

TEST_ASSETS += helm-binary

.PHONY: helm-binary
helm-binary: ## helm, for the chart's tests in test/e2e/image
	bash hack/build-helm.sh "$(HELM_ASSETS)" $(HELM_VERSION)
