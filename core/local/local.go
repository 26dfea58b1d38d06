// Package local runs a TrainJob's trainer command as local processes, one per node, with the env
// the Trainer controller would inject: a training step with no cluster at all. The Trainer
// simulator of the test bed runs trainer commands through it too.
package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/trainers"
	"github.com/trainstep/trainstep/core/trainjob"
)

// ErrEntrypointMissing means a program the runtime starts (torchrun, mpirun, python) is not
// installed on this machine.
var ErrEntrypointMissing = errors.New("entry point not installed")

// Runner runs trainer commands locally.
type Runner struct {
	// Out receives every node's output, each line prefixed with its rank ("[node-1] …"). May be nil.
	Out io.Writer
	// Dir is where each node gets a working directory; a temporary one if empty.
	Dir string
	// KeepLines is how many lines of each node's log are kept (default 1000).
	KeepLines int
	// OnLine, when set, receives every line of every node as it is written.
	OnLine func(node int, line string)
	// OnProgress, when set, receives the run as a face shows it each time a node reports progress
	// to the local status server (statusserver.go), and when rank 0 says what it resumed from.
	OnProgress func(trainjob.Observation)
	// CheckpointDir, when set, is every node's TRAINSTEP_CHECKPOINT_DIR, in place of the
	// cluster's (checkpoint.go): the directory every attempt of the step shares.
	CheckpointDir string
	// Attempt is the retry attempt, every node's TRAINSTEP_ATTEMPT and the attempt output.
	Attempt int
}

// Result is how a local run ended.
type Result struct {
	// TrainJob is the input with the status conditions the Trainer would have set.
	TrainJob *trainer.TrainJob
	Nodes    []NodeResult
	// Result is the function's return value as rank 0 wrote it (see trainers.ResultFileEnv).
	Result trainjob.ResultMessage
	// Culprit is the node that failed first (-1 if none failed on its own).
	Culprit int
	// Attempt is the Runner's; ResumedFrom the checkpoint rank 0 said it was offered
	// (trainers.ResumedFromLine), empty when none.
	Attempt     int
	ResumedFrom string
}

// failed is the node to blame for a failure, or nil.
func (res *Result) failed() *NodeResult {
	if res.Culprit >= 0 {
		return &res.Nodes[res.Culprit]
	}
	for i := range res.Nodes {
		if res.Nodes[i].ExitCode != 0 {
			return &res.Nodes[i]
		}
	}
	return nil
}

// NodeResult is one node's exit and its log.
type NodeResult struct {
	Index    int
	ExitCode int
	Log      []string
}

// Run runs the TrainJob's trainer on this machine and returns when every node has exited (or one
// failed, which stops the others, as a JobSet failure policy would). Cancelling ctx stops them.
func (r *Runner) Run(ctx context.Context, tj *trainer.TrainJob, rt *runtimes.Runtime) (*Result, error) {
	run, cleanup, err := r.prepare(tj, rt)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	out := tj.DeepCopy()
	out.CreationTimestamp = metav1.NewTime(time.Now())
	resumed := &resumeWatch{}
	notify := r.progress(out, run.nodes, resumed)
	status, err := startStatusServer(run.root, tj.Namespace, tj.Name, notify)
	if err != nil {
		return nil, err
	}
	defer status.stop()
	seen := func(line string) {
		if resumed.saw(line) && notify != nil {
			notify(status.lastOrZero())
		}
	}
	results, culprit, err := r.launch(ctx, run, status, seen)
	if err != nil {
		return nil, err
	}
	out.Status.TrainerStatus = status.last()
	res := &Result{TrainJob: out, Nodes: results, Culprit: culprit, Attempt: r.Attempt, ResumedFrom: resumed.from(), Result: run.result()}
	finish(out, res.failed())
	return res, nil
}

// localRun is a run laid out on this machine, before anything starts: what each launch runs,
// where, and with what the Trainer would inject.
type localRun struct {
	spec *trainer.Trainer
	rt   *runtimes.Runtime
	// port is the coordinator's (torchrun's rendezvous, JAX's, …) on 127.0.0.1.
	port         int
	nodes, procs int
	// launches is how many processes Run starts: one per node, or for MPI one mpirun on the
	// launcher that starts every rank.
	launches int
	command  []string
	// root holds every node's working directory; shims a python for a machine with only python3.
	root, shims string
}

// prepare lays the run out and checks, before anything starts, that this machine has what it
// runs. cleanup removes the working directory it made.
func (r *Runner) prepare(tj *trainer.TrainJob, rt *runtimes.Runtime) (run *localRun, cleanup func(), err error) {
	spec := tj.Spec.Trainer
	if spec == nil {
		spec = &trainer.Trainer{}
	}
	port, err := freePort()
	if err != nil {
		return nil, nil, err
	}
	run = &localRun{spec: spec, rt: rt, port: port}
	run.nodes, run.procs, run.command = layout(spec, rt, "127.0.0.1", port)
	if len(run.command) == 0 {
		return nil, nil, fmt.Errorf("the local backend runs commands, not images: %s has no command; set trainer.command", tj.Name)
	}
	if run.root, cleanup, err = r.workdir(tj.Name); err != nil {
		return nil, nil, err
	}
	fail := func(err error) (*localRun, func(), error) {
		cleanup()
		return nil, nil, err
	}
	if run.shims, err = pythonShim(run.root); err != nil {
		return fail(err)
	}
	if err := checkEntrypoints(rt, run.command, run.shims); err != nil {
		return fail(err)
	}
	run.launches = run.nodes
	if rt.Policy == runtimes.PolicyMPI {
		// One mpirun on the launcher starts every rank, as on a cluster.
		run.launches = 1
		if run.command, err = localMPI(run.command, run.root, run.nodes*run.procs); err != nil {
			return fail(err)
		}
	}
	return run, cleanup, nil
}

// launch starts every launch of the run and waits for them all. The first to fail is the
// culprit (-1 if none failed on its own) and stops the others.
func (r *Runner) launch(ctx context.Context, run *localRun, status *statusServer, seen func(string)) ([]NodeResult, int, error) {
	ctx, stopAll := context.WithCancel(ctx)
	defer stopAll()
	results := make([]NodeResult, run.launches)
	// The first node to fail is the one to blame; the others were stopped because of it.
	var firstFailed sync.Once
	culprit := -1
	var wg sync.WaitGroup
	var outMu sync.Mutex
	for i := range run.launches {
		dir := filepath.Join(run.root, fmt.Sprintf("node-%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, 0, fmt.Errorf("making the working directory of node %d: %w", i, err)
		}
		env := append(nodeEnv(run.rt, run.spec.Env, i, run.nodes, run.procs, run.port, dir, run.shims), trainers.ResultFileEnv+"="+filepath.Join(dir, resultFile))
		for k, v := range status.env() {
			env = append(env, k+"="+v)
		}
		env = append(env, r.checkpointEnv()...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = r.runNode(ctx, i, run.command, dir, env, &outMu, seen)
			if results[i].ExitCode != 0 {
				firstFailed.Do(func() {
					if ctx.Err() == nil {
						culprit = i
					}
					stopAll()
				})
			}
		}()
	}
	wg.Wait()
	return results, culprit, nil
}

// result is the function's return value as the first node that wrote one wrote it.
func (run *localRun) result() trainjob.ResultMessage {
	for i := range run.launches {
		if b, err := os.ReadFile(filepath.Join(run.root, fmt.Sprintf("node-%d", i), resultFile)); err == nil {
			if r, ok := trainjob.ReadResult(string(b)); ok {
				return r
			}
		}
	}
	return trainjob.ResultMessage{}
}

// layout is the node count, processes per node and command of a local run, with the
// coordinator at host:port.
func layout(spec *trainer.Trainer, rt *runtimes.Runtime, host string, port int) (nodes, procs int, command []string) {
	nodes = int(ptrOr(spec.NumNodes, rt.NumNodes))
	procs = int(ptrOr(spec.NumProcPerNode, ptrOr(rt.MPINumProcPerNode, 1)))
	// Without numProcPerNode the Trainer sizes a node by what it asks for, and so does this.
	switch gpus := gpusPerNode(spec, rt); {
	case spec.NumProcPerNode != nil:
	case rt.Policy == runtimes.PolicyTorch && gpus > 0:
		procs = gpus // torch plugin: "auto", which torchrun makes one process per GPU
	case rt.Policy == runtimes.PolicyTorch:
		procs = max(1, cpusPerNode(spec)) // torch plugin: one process per CPU asked for
	case rt.Policy == runtimes.PolicyMPI && procs == 1 && gpus > 1:
		procs = gpus // MPI plugin: a runtime's 1 slot per node becomes one per GPU
	}
	command = append(append([]string{}, orRuntime(spec.Command, rt.Command)...), orRuntime(spec.Args, rt.Args)...)
	if slices.Equal(spec.Command, trainers.TuneEntrypoint) {
		// The Trainer rewrites a torchtune job's command; run what it would.
		command = trainers.TuneCommand(rt.Name, rt.Command, int32(nodes), spec.NumProcPerNode, gpusPerNode(spec, rt),
			fmt.Sprintf("%s:%d", host, port), spec.Args)
	}
	return nodes, procs, command
}

// Node is what Run starts for one node, without this machine's env: the command (for MPI,
// before its hostfile is pointed at this machine) and the env (the runtime's, the TrainJob's,
// then what the Trainer's policy plugin injects).
type Node struct {
	Command []string
	Env     map[string]string
}

// Layout is what Run would start for tj on rt, without starting anything, with the coordinator
// at host:port: one Node per process it launches (for MPI one, the launcher, whose mpirun
// starts every rank). Tests compare it with the pods the real Trainer makes.
func Layout(tj *trainer.TrainJob, rt *runtimes.Runtime, host string, port int) []Node {
	spec := tj.Spec.Trainer
	if spec == nil {
		spec = &trainer.Trainer{}
	}
	nodes, procs, command := layout(spec, rt, host, port)
	launches := nodes
	if rt.Policy == runtimes.PolicyMPI {
		launches = 1
	}
	out := make([]Node, launches)
	for i := range out {
		env := map[string]string{}
		for _, e := range rt.Env {
			env[e.Name] = e.Value
		}
		for _, e := range spec.Env {
			env[e.Name] = e.Value
		}
		for k, v := range InjectedEnv(rt.Policy, i, nodes, procs, host, port) {
			env[k] = v
		}
		out[i] = Node{Command: command, Env: env}
	}
	return out
}

// cpusPerNode is the step's CPU request, else its limit, rounded up (the torch plugin's
// getNumCPUPerNode).
func cpusPerNode(spec *trainer.Trainer) int {
	if spec.ResourcesPerNode == nil {
		return 0
	}
	if q, ok := spec.ResourcesPerNode.Requests[corev1.ResourceCPU]; ok && !q.IsZero() {
		return int(q.Value())
	}
	if q, ok := spec.ResourcesPerNode.Limits[corev1.ResourceCPU]; ok {
		return int(q.Value())
	}
	return 0
}

// gpusPerNode is the step's nvidia.com/gpu limit, else the runtime's.
func gpusPerNode(spec *trainer.Trainer, rt *runtimes.Runtime) int {
	if spec.ResourcesPerNode != nil {
		if q, ok := spec.ResourcesPerNode.Limits["nvidia.com/gpu"]; ok {
			return int(q.Value())
		}
	}
	n, _ := strconv.Atoi(rt.DeviceCount) // "Unknown" when the runtime has no accelerator
	return n
}

func orRuntime(own, rt []string) []string {
	if len(own) > 0 {
		return own
	}
	return rt
}

func ptrOr(p *int32, def int32) int32 {
	if p != nil {
		return *p
	}
	return def
}

func (r *Runner) workdir(name string) (string, func(), error) {
	if r.Dir != "" {
		d := filepath.Join(r.Dir, name)
		return d, func() {}, os.MkdirAll(d, 0o755)
	}
	d, err := os.MkdirTemp("", "trainstep-"+name+"-")
	if err != nil {
		return "", nil, fmt.Errorf("making a working directory: %w", err)
	}
	return d, func() { _ = os.RemoveAll(d) }, nil
}

// finish sets the conditions the Trainer copies from its JobSet.
func finish(tj *trainer.TrainJob, failed *NodeResult) {
	now := metav1.NewTime(time.Now())
	if n := failed; n != nil {
		apimeta.SetStatusCondition(&tj.Status.Conditions, metav1.Condition{
			Type: trainer.TrainJobFailed, Status: metav1.ConditionTrue, Reason: "FailedJobs",
			Message: fmt.Sprintf("jobset failed due to one or more job failures: node-%d exited with code %d", n.Index, n.ExitCode), LastTransitionTime: now,
		})
		return
	}
	apimeta.SetStatusCondition(&tj.Status.Conditions, metav1.Condition{
		Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: "AllJobsCompleted",
		Message: "jobset completed successfully", LastTransitionTime: now,
	})
}

// Observe renders a local result the way every face renders a cluster one, log tail included.
func (res *Result) Observe() trainjob.Observation {
	obs := trainjob.Observe(res.TrainJob, nil).WithResult(res.Result)
	obs = withResume(obs, res.Attempt, res.ResumedFrom)
	if note := obs.ResumeNote(); note != "" {
		obs.Message += "; " + note
	}
	if obs.Phase != trainjob.PhaseFailed {
		return obs
	}
	n := res.failed()
	if n == nil {
		return obs
	}
	obs.Failure = trainjob.Classified(trainjob.ClassCode) // a local process exited non-zero: the code's
	lines := n.Log
	if len(lines) > trainjob.TailLines {
		lines = lines[len(lines)-trainjob.TailLines:]
	}
	return obs.WithLogTail(fmt.Sprintf("node-%d", n.Index), trainjob.NodeContainer, strings.Join(lines, "\n"))
}

func (r *Runner) runNode(ctx context.Context, i int, command []string, dir string, env []string, outMu *sync.Mutex, seen func(string)) NodeResult {
	res := NodeResult{Index: i}
	cmd := exec.CommandContext(ctx, command[0], command[1:]...)
	cmd.Dir, cmd.Env = dir, env
	// A process group, so torchrun's and mpirun's children stop with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	keep := r.KeepLines
	if keep <= 0 {
		keep = 1000
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			line := sc.Text()
			res.Log = append(res.Log, line)
			if len(res.Log) > keep {
				res.Log = res.Log[len(res.Log)-keep:]
			}
			seen(line)
			if r.OnLine != nil {
				r.OnLine(i, line)
			}
			if r.Out != nil {
				outMu.Lock()
				fmt.Fprintf(r.Out, "[node-%d] %s\n", i, line)
				outMu.Unlock()
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	err := cmd.Start()
	if err == nil {
		err = cmd.Wait()
	}
	_ = pw.Close()
	<-done
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		res.ExitCode = exit.ExitCode()
		if res.ExitCode < 0 {
			// Killed by a signal: the code a container runtime reports for it (137 for SIGKILL).
			res.ExitCode = 128 + int(syscall.SIGTERM)
			if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				res.ExitCode = 128 + int(ws.Signal())
			}
		}
	default:
		res.ExitCode = 127
		res.Log = append(res.Log, fmt.Sprintf("trainstep: starting %s: %v", command[0], err))
	}
	return res
}

// nodeEnv is the process env of one node: this machine's env, the runtime's container env, the
// TrainJob's env, and what the Trainer's policy plugin injects, pointed at this machine.
func nodeEnv(rt *runtimes.Runtime, own []corev1.EnvVar, rank, nodes, procs, port int, dir, shims string) []string {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	for _, e := range rt.Env {
		env[e.Name] = e.Value
	}
	for _, e := range own {
		if e.ValueFrom != nil {
			continue // a Secret or ConfigMap key (pod.env): this machine's own value, if any, stays
		}
		env[e.Name] = e.Value
	}
	if shims != "" {
		env["PATH"] = shims + string(os.PathListSeparator) + env["PATH"]
	}
	env["PYTHONUNBUFFERED"] = "1"
	env[trainers.ScriptDirEnv] = dir
	for k, v := range InjectedEnv(rt.Policy, rank, nodes, procs, "127.0.0.1", port) {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// InjectedEnv is what the Trainer controller's policy plugins set on node `rank`, with the
// coordinator at host:port.
func InjectedEnv(p runtimes.Policy, rank, nodes, procs int, host string, port int) map[string]string {
	switch p {
	case runtimes.PolicyTorch:
		return map[string]string{
			"PET_NNODES": strconv.Itoa(nodes), "PET_NPROC_PER_NODE": strconv.Itoa(procs), "PET_NODE_RANK": strconv.Itoa(rank),
			"PET_MASTER_ADDR": host, "PET_MASTER_PORT": strconv.Itoa(port),
		}
	case runtimes.PolicyJAX:
		return map[string]string{
			"JAX_NUM_PROCESSES": strconv.Itoa(nodes), "JAX_PROCESS_ID": strconv.Itoa(rank),
			"JAX_COORDINATOR_ADDRESS": fmt.Sprintf("%s:%d", host, port),
		}
	case runtimes.PolicyXGBoost:
		return map[string]string{
			"DMLC_TRACKER_URI": host, "DMLC_TRACKER_PORT": strconv.Itoa(port), "DMLC_TASK_ID": strconv.Itoa(rank),
			"DMLC_NUM_WORKER": strconv.Itoa(nodes),
		}
	case runtimes.PolicyMPI:
		return map[string]string{"OMPI_MCA_orte_set_default_slots": strconv.Itoa(procs)}
	}
	return nil
}

// localMPI points mpirun at a hostfile of this machine instead of the Trainer's /etc/mpi/hostfile.
func localMPI(command []string, root string, slots int) ([]string, error) {
	hostfile := filepath.Join(root, "hostfile")
	if err := os.WriteFile(hostfile, []byte(fmt.Sprintf("localhost slots=%d\n", slots)), 0o644); err != nil {
		return nil, fmt.Errorf("writing the local MPI hostfile: %w", err)
	}
	out := []string{command[0], "-np", strconv.Itoa(slots)}
	if os.Geteuid() == 0 {
		out = append(out, "--allow-run-as-root")
	}
	for i := 1; i < len(command); i++ {
		if command[i] == "--hostfile" && i+1 < len(command) {
			out = append(out, "--hostfile", hostfile)
			i++
			continue
		}
		out = append(out, command[i])
	}
	return out, nil
}

// pythonShim makes `python` mean python3 where only python3 is installed (Debian, macOS).
func pythonShim(root string) (string, error) {
	if _, err := exec.LookPath("python"); err == nil {
		return "", nil
	}
	py3, err := exec.LookPath("python3")
	if err != nil {
		return "", nil //nolint:nilerr // no python3 is not an error here: checkEntrypoints names what is missing
	}
	dir := filepath.Join(root, "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("making the python shim: %w", err)
	}
	if err := os.Symlink(py3, filepath.Join(dir, "python")); err != nil {
		return "", fmt.Errorf("making the python shim: %w", err)
	}
	return dir, nil
}

// checkEntrypoints says clearly which program is missing, before anything starts.
func checkEntrypoints(rt *runtimes.Runtime, command []string, shims string) error {
	need := []string{command[0]}
	script := strings.Join(command, " ")
	if strings.Contains(script, "exec torchrun ") {
		need = append(need, "torchrun")
	}
	if strings.Contains(script, "exec python ") || strings.Contains(script, "python -c") {
		need = append(need, "python")
	}
	for _, prog := range need {
		if _, err := exec.LookPath(prog); err == nil {
			continue
		}
		if prog == "python" && shims != "" {
			continue
		}
		return fmt.Errorf("%w: %s is not installed on this machine, and runtime %s (mlPolicy.%s) starts the trainer with it; %s",
			ErrEntrypointMissing, prog, rt.Name, rt.Policy, installHint(prog))
	}
	return nil
}

func installHint(prog string) string {
	switch prog {
	case "torchrun":
		return "install PyTorch (pip install torch), or run the step on the cluster"
	case "mpirun":
		return "install Open MPI (apt-get install openmpi-bin), or run the step on the cluster"
	case "python":
		return "install Python 3"
	}
	return "install it, or run the step on the cluster"
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port for the coordinator: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// resultFile stands in for /dev/termination-log in each node's directory.
const resultFile = "termination-log"
