#!/usr/bin/env bash
# make mutation: go-gremlins over each package named, with that package's own tests (the fast
# ones: the lifecycle model checker runs a few hundred sequences per mutant, not its 10,000),
# one package at a time. Each package's summary goes to mutation.out; docs/testing.md keeps the
# figures and the survivors judged equivalent. No --test-cpu: gremlins v0.6.0 passes it to go test
# as one argument ("-cpu 1"), which every test binary refuses, so every mutant reads as killed.
# The timeout is 30 times the package's tests' time (MUTATION_TIMEOUT_COEFFICIENT): each mutant is
# compiled and linked inside it, and at 10 a loaded 2-core machine timed out two mutants in three
# of core/step, which gremlins leaves out of the efficacy rather than count as killed.
set -euo pipefail
version=$1
shift
out=${MUTATION_OUT:-mutation.out}
: > "$out"
export LIFECYCLE_MODEL_SEQUENCES=${LIFECYCLE_MODEL_SEQUENCES:-300}
for pkg in "$@"; do
	echo "== $pkg" | tee -a "$out"
	go run "github.com/go-gremlins/gremlins/cmd/gremlins@$version" unleash \
		--workers "${MUTATION_WORKERS:-2}" --timeout-coefficient "${MUTATION_TIMEOUT_COEFFICIENT:-30}" \
		--output-statuses lt "./$pkg" 2>&1 | tee -a "$out"
done
echo "== efficacy (killed / (killed + lived)) and mutant coverage, per package" | tee -a "$out"
awk '/^== core/ {pkg=$2} /Test efficacy|Mutator coverage/ {print pkg": "$0}' "$out" | tee -a "$out.summary"
