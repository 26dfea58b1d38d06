#!/usr/bin/env bash
# make bench: every figure of the scale work (issue 10), measured in one run and written to
# docs/benchmarks.md with the machine and versions they were measured on. Each section is one
# `go test -bench` (or one test) whose raw lines are kept in $RAW for benchstat.
#
#   BENCH=sidebyside,sidecar,fleet,calls,janitor,tekton,notice,workloads,handoff,core,cache,cli (default: all) picks sections;
#   STEPS, JOBS, FLEET, RUNS, WORKFLOWS, WORKLOADS size them (defaults: the issues' figures);
#   SECTIONS=dir keeps each section's output in dir, so that a section run again (BENCH=tekton)
#   replaces only its own table and the others stay as measured (each table names its run).
# A section that fails is reported and the others still run; the script then exits 1.
set -euo pipefail

BENCH=${BENCH:-sidebyside,sidecar,fleet,calls,janitor,tekton,notice,workloads,handoff,core,cache,cli}
STEPS=${STEPS:-20}   # concurrent training steps each way, side by side
JOBS=${JOBS:-10000}  # other workflows' TrainJobs in the Argo sidecar's namespace (2 pods each)
FLEET=${FLEET:-100}  # workflows live at once, one sidecar process each
RUNS=${RUNS:-10000}  # CustomRuns live at once on one Tekton controller
WORKFLOWS=${WORKFLOWS:-5000} # finished Workflows the Argo janitor caches
WORKLOADS=${WORKLOADS:-5000} # other jobs' Kueue Workloads beside the Tekton controller
NOTICE_RUNS=${NOTICE_RUNS:-200} # CustomRuns each way, Tekton's notice beside its floor
HANDOFF_STEPS=${HANDOFF_STEPS:-20} # MultiKueue steps handed from the worker to the manager
OUT=${OUT:-docs/benchmarks.md}
RAW=${RAW:-bench.out}
K8S_VERSION=${K8S_VERSION:-unknown}
if [[ -n ${SECTIONS:-} ]]; then
	tmp=$SECTIONS
	mkdir -p "$tmp"
else
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
fi
failed=()

want() { [[ ",$BENCH," == *",$1,"* ]]; }

# run NAME PKG ARGS...: go test into $tmp/NAME.out and $RAW.
run() {
	local name=$1 pkg=$2
	shift 2
	echo "== $name: go test $* $pkg" >&2
	date -u '+%Y-%m-%d %H:%M UTC' >"$tmp/$name.when"
	if ! go test -count=1 -timeout 60m "$@" "$pkg" 2>&1 | tee "$tmp/$name.out" >&2; then
		failed+=("$name")
	fi
}

# measured NAME: when section NAME's figures were measured.
measured() { cat "$tmp/$1.when" 2>/dev/null || echo "never"; }

# table turns benchmark lines into a Markdown table: one row per benchmark, one column per unit
# (ns/op left out: these benchmarks report their own figures).
table() {
	awk '
	/^Benchmark/ {
		name = $1; sub(/-[0-9]+$/, "", name); sub(/^Benchmark/, "", name)
		if (!(name in known)) { known[name] = 1; rows[++n] = name }
		for (i = 3; i < NF; i += 2) {
			u = $(i + 1)
			if (u == "ns/op") continue
			if (!(u in seen)) { seen[u] = 1; units[++m] = u }
			val[name, u] = $i
		}
	}
	END {
		if (n == 0) { print "_not measured in this run_"; exit }
		printf "| benchmark |"; for (j = 1; j <= m; j++) printf " %s |", units[j]; printf "\n"
		printf "|---|"; for (j = 1; j <= m; j++) printf "---:|"; printf "\n"
		for (r = 1; r <= n; r++) {
			printf "| %s |", rows[r]
			for (j = 1; j <= m; j++) printf " %s |", val[rows[r], units[j]]
			printf "\n"
		}
	}' "$1"
}

touch "$tmp"/{sidebyside,sidecar,fleet,calls,janitor,tekton,notice,workloads,handoff,core,cache,cli}.out
if want sidebyside; then : >"$tmp/sidebyside.out"; fi
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
start=$(date +%s)
if want sidebyside; then
	# Twice: under Argo's default requeue time and agent patch rate (10s), and under 1s.
	for requeue in 10s 1s; do
		TRAINSTEP_ARGO_REQUEUE=$requeue TRAINSTEP_BENCH_STEPS=$STEPS run "sidebyside-$requeue" ./test/e2e/argo/ \
			-run '^$' -bench '^BenchmarkSideBySide$' -benchtime 1x
		sed -E "s#^BenchmarkSideBySide/#BenchmarkSideBySide/argo-requeue=$requeue/#" "$tmp/sidebyside-$requeue.out" >>"$tmp/sidebyside.out"
	done
	cp "$tmp/sidebyside-10s.when" "$tmp/sidebyside.when"
fi
if want sidecar; then
	TRAINSTEP_BENCH_JOBS=$JOBS run sidecar ./test/integration/argo/ -run '^$' -bench '^BenchmarkSidecarRSS$' -benchtime 1x
fi
if want fleet; then
	TRAINSTEP_BENCH_SIDECARS=$FLEET run fleet ./test/integration/argo/ -run '^$' -bench '^BenchmarkSidecarFleet$' -benchtime 1x
fi
if want calls; then
	run calls ./test/integration/argo/ -run '^$' -bench '^BenchmarkStatusCalls$' -benchtime 20000x
fi
if want janitor; then
	TRAINSTEP_BENCH_WORKFLOWS=$WORKFLOWS run janitor ./test/integration/argo/ -run '^$' -bench '^BenchmarkJanitorRSS$' -benchtime 1x
fi
if want tekton; then
	TRAINSTEP_BENCH_RUNS=$RUNS run tekton ./test/integration/tekton/ -run '^$' -bench '^BenchmarkConcurrentRuns$' -benchtime 1x
fi
if want notice; then
	TRAINSTEP_BENCH_NOTICE_RUNS=$NOTICE_RUNS run notice ./test/integration/tekton/ -run '^$' -bench '^BenchmarkTektonNotice$' -benchtime 1x
fi
if want workloads; then
	TRAINSTEP_BENCH_WORKLOADS=$WORKLOADS run workloads ./test/integration/tekton/ -run '^$' -bench '^BenchmarkTektonWorkloadCache$' -benchtime 1x
fi
if want handoff; then
	TRAINSTEP_BENCH_HANDOFF_STEPS=$HANDOFF_STEPS run handoff ./test/realstack/multikueue/ -run '^$' -bench '^BenchmarkMultiKueueHandoff$' -benchtime 1x
fi
if want core; then
	run core ./test/integration/core/ -run '^$' -bench '^Benchmark(Notice|Submit)$' -benchtime 200x
fi
if want cache; then
	run cache ./test/integration/core/ -run '^$' -bench '^BenchmarkCacheHit$' -benchtime 300x
fi
if want cli; then
	run cli ./test/integration/core/ -v -run '^TestRunStepHoldsAtMostTwoConnections$'
fi
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
took=$(($(date +%s) - start))

sections=(sidebyside sidecar fleet calls janitor tekton notice workloads handoff core cache cli)
for name in "${sections[@]}"; do
	grep -E '^(Benchmark|goos|goarch|pkg|cpu)' "$tmp/$name.out" || true
done >"$RAW"

# section NAME: when it was measured, then its table.
section() {
	if [[ ! -s $tmp/$1.when ]]; then
		echo "_Not measured._"
		return
	fi
	echo "Measured $(measured "$1")."
	echo
	table "$tmp/$1.out"
}

mod() { go list -m -f '{{.Version}}' "$1"; }
cli_line=$(grep -o 'one step: .*' "$tmp/cli.out" | head -1 || true)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
{
	cat <<EOF
# Benchmarks

Generated by \`make bench\` (hack/$(basename "$0")); do not edit by hand. Figures of one table were
measured in the same run on the same apiserver; compare rows, not runs of different days. The
last run took $((took / 60)) min (sections: ${BENCH}). The raw lines are in \`$RAW\` (\`benchstat $RAW\`).
What changed between runs and why, measured side by side against older trees:
[benchmark-history.md](benchmark-history.md).

| | |
|---|---|
| written | $(date -u '+%Y-%m-%d %H:%M UTC') |
| machine | $(uname -srm), ${cpu:-unknown CPU}, $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo) |
| load average (1, 5, 15 min), last run | before ${load_before}; after ${load_after} |
| Go | $(go env GOVERSION) |
| control plane | kube-apiserver ${K8S_VERSION} and etcd (envtest), built from pinned modules |
| engines | Argo workflow-controller and argoexec $(mod github.com/argoproj/argo-workflows/v3); Tekton Pipelines $(mod github.com/tektoncd/pipeline) controller |
| modules | Trainer $(mod github.com/kubeflow/trainer/v2), client-go $(mod k8s.io/client-go), controller-runtime $(mod sigs.k8s.io/controller-runtime) |
| trainstep | $(git rev-parse --short HEAD) |

Units: \`-ms\` milliseconds, \`-MB\` MiB (from /proc: VmRSS, the Go heap in use), \`/step\` per
training step, \`/run\` per CustomRun.

## A TrainJob from Argo, four ways, side by side (\`BenchmarkSideBySide\`)

${STEPS} concurrent training steps each way, one way after another, on the same apiserver in the
same run. The Trainer simulator holds every TrainJob running; once all are running the benchmark
writes the Complete condition to TrainJob *i* at *i*·10 s/${STEPS} (spread over two 5 s poll
periods, so the pollers' phases are sampled evenly).

- \`trainstep\`: one Workflow of ${STEPS} parallel trainstep steps under Argo's own workflow-controller;
  the agent pod's \`argoexec agent\` and \`executor argo-plugin\` run as local processes with the pod's env.
- \`argo-resource\`: one Workflow of ${STEPS} parallel \`resource\` steps (\`action: create\`,
  \`successCondition\`, \`failureCondition\`, two \`jsonPath\` outputs) under the same controller; each
  pod's containers (\`argoexec init\`, then \`argoexec emissary -- argoexec resource create\`) run as
  local processes in their own mount and PID namespaces, and the pod's status is written as a
  kubelet would. argoexec polls the TrainJob every 5 s (\`RESOURCE_STATE_CHECK_INTERVAL\`) from a
  pod held for the whole job.
- \`poll-2s\`: a Go process that GETs each TrainJob every 2 s: the Kubeflow SDK's
  \`wait_for_job_status\` (whose \`get_job\` also reads the runtime and lists pods each time, so
  this undercounts its requests).
- \`watch\`: the same process with one bare client-go watch per TrainJob: the floor.

\`argo-requeue\` is the workflow-controller's \`DEFAULT_REQUEUE_TIME\`, which it also gives the
agent as \`ARGO_AGENT_PATCH_RATE\`: the agent writes plugin replies into the WorkflowTaskSet at
that rate, so a plugin step's completion reaches the Workflow up to that long after trainstep
answered (trainstep's own part, terminal write → reply, is the fleet's \`notice\` below).
Argo's default is 10s; \`RESOURCE_STATE_CHECK_INTERVAL\` is Argo's default (5 s) in both runs.

- \`notice-p50-ms\`, \`notice-p99-ms\`: from the instant before the status write that made the
  TrainJob terminal to the event, on the benchmark's own watch of the Workflow, in which the
  step's node first shows a terminal phase (Argo ways), or to the process noticing (poll, watch);
  nearest-rank percentiles.
- \`pods/step\`: pods the workflow-controller created for the way's Workflow (the apiserver's
  audit log) ÷ steps: one agent pod for all of trainstep's steps, one pod per resource step.
- \`api-requests/step\`: every request in the apiserver's audit log from the way's start until it
  settled ÷ steps: the plugin's and the agent's ServiceAccounts (trainstep), the resource pods'
  ServiceAccount, kubectl's discovery and OpenAPI reads inside argoexec included
  (argo-resource), the process's own (poll, watch, its creates included), and the
  workflow-controller's requests of that window (one way at a time), leases and informer watches
  left out. Not counted: the simulator, and the pod status writes that stand in for a kubelet (a
  real kubelet adds about 3 per pod). A poller's count grows with the job's length (one GET per
  2 s or 5 s of training); trainstep's and the watch's do not.
- \`rss-MB/step\`: resident memory of the processes that hold the steps once all are running,
  ÷ steps: the agent's argoexec and the plugin (trainstep); every process of every resource pod,
  each with its own copy of the 150 MB argoexec binary (argo-resource); the Go process (poll,
  watch; the SDK's Python process would be larger).

$(section sidebyside)

## Argo: one sidecar in a busy namespace (\`BenchmarkSidecarRSS\`)

The shipped binary (\`make build\`: static, stripped, \`-tags nomsgpack\`), \`executor argo-plugin
--workflow wf-x\` as in an agent pod, once its cache has synced: in an empty namespace, and in
one holding ${JOBS} TrainJobs of 10 other workflows (4 KB of function source each) and
$((2 * JOBS)) JobSet pods whose command carries that source and which carry trainstep's pod labels
(as the Trainer makes them from spec.runtimePatches). \`unscoped\` is the same sidecar without
\`--workflow\`. \`rss-MB\` is the process's resident set, \`anon-MB\` its private (anonymous) part:
the rest is the binary's own pages (code, read-only data, the function table the runtime reads),
mapped from the image, shared by every sidecar on a node and reclaimable. \`heap-MB\` is the Go
heap in use 3 s after the cache synced. With \`--workflow\` the cache holds the sidecar's own
workflow's TrainJobs and pods only, so its footprint does not move with the namespace.

$(section sidecar)

## Argo: ${FLEET} workflows at once, one sidecar each (\`BenchmarkSidecarFleet\`)

${FLEET} real \`executor argo-plugin --workflow wf-i\` processes in one namespace against one
apiserver, each with one training step whose first call created its TrainJob and is held, as
the agent calls. \`rss-MB-sum\` and \`apiserver-watches\` (the WATCH series of the apiserver's
\`apiserver_longrunning_requests\`, this fleet's added watches: TrainJobs, pods, Events, the
Workflow and the two runtime kinds, 6 per sidecar) are read while every call is held; then each
TrainJob is completed while its call is held, and \`notice\` runs from that status write to the
held call's terminal reply: trainstep's own part of the hand-off.

$(section fleet)

## Argo: \`template.execute\` on tracked jobs (\`BenchmarkStatusCalls\`)

Status calls (not held: \`--hold-max 0\`) on 1,000 tracked TrainJobs, from 16 concurrent
clients, as the agent's 16 task workers (\`ARGO_AGENT_TASK_WORKERS\`) call, each client on a
kept-alive connection. (The agent's own client keeps Go's default two idle connections per host
and dials anew beyond two calls in flight; at thousands of calls a second that fills the
loopback's ephemeral ports with TIME_WAIT sockets and measures the kernel's port search rather
than the plugin.) \`load=flat-out\`: each client calls again as soon as its call returns, so
\`calls/s\` is the most the server answers and the latency is mostly queueing (16 calls in flight
on the machine's cores). \`load=2000-per-s\`: calls due at 2,000 a second, open loop, each call's
latency counted from when it was due, so a stall anywhere (client, kernel, server) shows in the
tail rather than slowing the load.

- \`plugin=sidecar\`: the real sidecar process. \`call-\` figures are what the clients see;
  \`handler-\` figures the sidecar's own account of the same calls (the duration it logs per
  call: token check to reply rendered); \`sidecar-rss-MB\` with 1,000 jobs in its cache.
- \`plugin=canned-reply\`: the floor: a process that answers every call with the bytes of one
  of the sidecar's replies and does nothing else, under the same clients and load. What an HTTP
  call between two processes costs on this machine; the sidecar's \`call-\` figures carry it too.
- \`plugin=in-process\`: the plugin in the benchmark's process, to count its API requests (its
  latency also carries the benchmark's own collector and simulator).

Clients, servers and apiserver share the machine's cores.

$(section calls)

## Argo: the janitor over ${WORKFLOWS} finished Workflows (\`BenchmarkJanitorRSS\`)

The janitor runs once per cluster and caches every Workflow of the cluster, most of them long
finished. The shipped binary (\`make build\`), \`executor argo-janitor\` with the \`GOMEMLIMIT\` of
\`manifests/argo/janitor.yaml\` (its limit is 128Mi), over ${WORKFLOWS} Succeeded Workflows, each a
DAG of ten trainstep steps with its templates and every node's inputs, outputs and message
(\`workflow-KB\`: one of them as JSON), read once its cache has synced and it has reconciled every
Workflow, 3 s later. The cache keeps of a Workflow only what the janitor reads (of a finished
one, its name, UID, phase and completed label), and no managedFields.

$(section janitor)

## Tekton: ${RUNS} CustomRuns live at once on one controller (\`BenchmarkConcurrentRuns\`)

The real \`executor tekton-controller\` binary (\`--kube-api-qps 500\`: at the default 50 it takes
about 10 minutes only to start 10,000 runs) with ${RUNS} CustomRuns created 16 at a time, held
running by the Trainer simulator until all are running, then completed one at a time.
\`api-requests/run\` is every request of the controller's user in the apiserver's audit log from
its start to the last run finished, divided by the runs (a create, three status writes, the
start record, one Event; no LIST, no TrainJob read); \`notice\` runs from the TrainJob's terminal
status write to the CustomRun's terminal condition; \`rss-MB\` with every run live,
\`peak-rss-MB\` the high water; \`heap-MB\` the Go heap in use then, garbage not yet collected
included (it swings by half from one run to the next), \`live-heap-MB\` what the controller
holds after a collection (\`--pprof-bind-address\`, \`/debug/pprof/heap?gc=1\`).

$(section tekton)

## Tekton: its notice beside its floor (\`BenchmarkTektonNotice\`)

${NOTICE_RUNS} CustomRuns each way, one way after the other in the same run on the same
apiserver, each TrainJob completed one at a time and timed as above (its terminal status write →
the CustomRun's terminal condition on the benchmark's watch). \`way=trainstep\`: the real
\`executor tekton-controller\`, as in the section above. \`way=watch+status-write\`: the floor of
any custom task controller, one bare watch of the namespace's TrainJobs and one merge-patch of
the CustomRun's status when one turns Complete (no cache, no queue, no outputs, no reads of pods
or Events). The difference is what trainstep's reconcile costs on top of seeing the job end and
saying so. The command: \`TRAINSTEP_BENCH_NOTICE_RUNS=${NOTICE_RUNS} go test -run '^\$' -bench
'^BenchmarkTektonNotice\$' -benchtime 1x ./test/integration/tekton/\` (\`make bench\`'s section \`notice\`).

$(section notice)

## Tekton: the controller beside ${WORKLOADS} Kueue Workloads of other jobs (\`BenchmarkTektonWorkloadCache\`)

Kueue makes a Workload for every job it queues, of every kind, with the job's pod templates
in it; the controller watches Workloads to read a queued TrainJob's. The controller in a
namespace of its own, then ${WORKLOADS} Workloads of batch/v1 Jobs created 16 at a time, each
with a 20 KiB script in its pod template's command (\`workload-KB\`: one of them as JSON), until
its cache holds them all. \`heap-MB\` is the Go heap in use their arrival added and kept (after
a full collection, before and after), in the benchmark's process; \`heap-KB/workload\` the same
÷ Workloads. \`cache=whole\`: the controller on a cache that keeps Workloads as it did before
they were trimmed (every Workload whole, but for managedFields); \`cache=trimmed\`: as
\`tekton-controller\` runs, listing only Workloads Kueue made for a job and keeping of one no
TrainJob owns only its identity and owners. The command: \`TRAINSTEP_BENCH_WORKLOADS=${WORKLOADS} go test
-run '^\$' -bench '^BenchmarkTektonWorkloadCache\$' -benchtime 1x ./test/integration/tekton/\`
(\`make bench\`'s section \`workloads\`).

$(section workloads)

## MultiKueue: the hand-off from the worker to the manager (\`BenchmarkMultiKueueHandoff\`)

Two real stacks on loopback, a MultiKueue manager and its worker, each with the real Kueue
v0.17.0 and Trainer (test/internal/realstack/multikueue.go), and the Tekton face (Tekton's own
controller and trainstep's) on the manager. ${HANDOFF_STEPS} steps as CustomRuns, each dispatched
to the worker and held running there; then, one at a time, a step's pods are released. From the
instant the benchmark's watch on the worker sees the worker's TrainJob end: \`watch\`, until a
bare watch on the manager sees the manager's TrainJob end (Kueue mirrored the status: the floor
of any follower on the manager); \`handoff\`, until the step's CustomRun is seen terminal
(trainstep noticed the mirrored status and wrote the run's end: what the pipeline waits).
Nearest-rank percentiles over the steps, both from the same steps. The command:
\`TRAINSTEP_BENCH_HANDOFF_STEPS=${HANDOFF_STEPS} go test -run '^\$' -bench '^BenchmarkMultiKueueHandoff\$'
-benchtime 1x ./test/realstack/multikueue/\` (\`make bench\`'s section \`handoff\`).

$(section handoff)

## The core: notice and submit against the bare client (\`BenchmarkNotice\`, \`BenchmarkSubmit\`)

\`wait=watch-vs-bare\`: trainstep's wait (TrainJob, pods and Events followed) and a bare
client-go watch on the same kind of object (listed, then watched from that version, as
\`kubectl wait\` does), alternated per iteration on fresh TrainJobs once the simulator has made
their pods; \`ratio-p50\` is trainstep's p50 over the bare watch's. \`submit=new-vs-bare\`:
trainstep's Submit on the faces' path (reads from an informer cache, writes through the client)
alternated with a bare create; \`submit=replay\` submits a job that exists (a refused create,
then a cache read).

$(section core)

## The step cache: a hit beside a plain step's submit (\`BenchmarkCacheHit\`)

A step's first look on the engine every face runs (\`core/lifecycle\`), TrainJobs read from an
indexed informer cache as the faces read them: a step with a \`cache\` block whose key has a
stored success (\`hit\`: planning, the key, one read of the ConfigMap; nothing created) alternated
with the same step without the block (\`submit\`: planning, then the TrainJob's create); and
planning alone (\`plan\`), which both do first. A hit ends the step; a plain step then trains.
The command: \`go test -run '^\$' -bench '^BenchmarkCacheHit\$' -benchtime 300x
./test/integration/core/\` (\`make bench\`'s section \`cache\`).

$(section cache)

## \`executor run\`: connections per step (\`TestRunStepHoldsAtMostTwoConnections\`)

Three watches (TrainJob, pods, Events) and the node-0 log stream at once, counted at the dialer
and at the HTTP client (measured $(measured cli)): ${cli_line:-not measured}. The watches and the stream are
HTTP/2 streams of one connection; with HTTP/2 off (\`DISABLE_HTTP2=1\`, or a proxy that only
speaks HTTP/1.1) each holds its own connection.
EOF
} >"$OUT"
echo >&2
cat "$OUT"
if ((${#failed[@]} > 0)); then
	echo "make bench: these sections failed (their output is above; figures they printed are in $OUT): ${failed[*]}" >&2
	exit 1
fi
