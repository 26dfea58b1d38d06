# The compatibility matrix (hack/compat): trainstep's suites on every supported release of Argo,
# Tekton, Kubernetes and the Trainer, each release's binaries built once into the same cache as
# `make test-assets` (so a row of today's releases builds nothing). Writes docs/compatibility.md
# and docs/compatibility.json. Not part of `make test`. ROWS picks rows: a system (argo, tekton,
# k8s, trainer), a row (argo@v4.0.7), a comma-separated list of either, or all (the default,
# without the deferred Trainer rows).
ROWS ?=

.PHONY: test-compat
test-compat: build ## the compatibility matrix → docs/compatibility.md (ROWS=argo,tekton@v0.68.0 runs some rows)
	go run ./hack/compat -rows "$(ROWS)"
