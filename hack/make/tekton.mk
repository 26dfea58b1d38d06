# The Tekton face (plugin/tekton): its end-to-end tests run Tekton's own pipelines controller,
# built once from the pinned module into the cache (hack/build-tekton.sh).
TEKTON_VERSION ?= v1.3.0
export TEKTON_ASSETS := $(CACHE_DIR)/tekton/$(TEKTON_VERSION)

TEST_ASSETS += tekton-controller

.PHONY: tekton-controller
tekton-controller: ## Tekton's pipelines controller and entrypoint, for test/e2e/tekton and test/realstack/tekton
	bash hack/build-tekton.sh "$(TEKTON_ASSETS)" $(TEKTON_VERSION)
