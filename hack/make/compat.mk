# The compatibility matrix (hack/compat): trainstep's suites on every supported release of Argo,
# Tekton, Kubernetes and the Trainer, each release's binaries built once into the same cache as
# `make test-assets` (so a row of today's releases builds nothing; the other variables keep those
# defaults). Writes docs/compatibility.json and docs/compatibility.md, and remakes the generated
# files after each row (the README's compatibility block is made from the results). Not part of
# `make test`. ROWS picks rows: a system (argo, tekton, k8s, trainer), a row (argo@v4.0.7), a
# comma-separated list of either, or all (the default).
ROWS ?=

.PHONY: test-compat
test-compat: build test-assets test-argov4 test-fuzz ## the compatibility matrix → docs/compatibility.md and the README's table (ROWS=argo,tekton@v0.68.0 runs some rows), the image on every platform, Argo v4's wire, fuzzing
	go test -count=1 ./test/e2e/image/
	go run ./hack/compat -rows "$(ROWS)"
