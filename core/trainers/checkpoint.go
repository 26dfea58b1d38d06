package trainers

import (
	"strings"

	"github.com/trainstep/trainstep/core/step"
)

// CheckpointMarker is the file save_checkpoint writes last into a step-<N> directory: a
// checkpoint without it is never resumed.
const CheckpointMarker = "TRAINSTEP_COMPLETE"

// ResumedFromLine starts the one line rank 0 prints when the script offers the function a
// checkpoint (`trainstep: resumed-from <path>`): where the path is known only inside the
// container, the local backend (and, later, a face reading the node-0 log) learns it from this.
const ResumedFromLine = "trainstep: resumed-from "

// ResumedFromMetric is the status.trainerStatus metric rank 0 posts while it trains from a
// checkpoint: the checkpoint directory's name (step-400), at most 64 characters as the Trainer
// takes them. It is trainstep's, not the function's: no face shows it as a metric.
const ResumedFromMetric = OwnMetricPrefix + "resumed-from"

// checkpointer is the helpers every function trainer's script defines beside report(), so the
// same code resumes under `executor run --local` and on a cluster, with no SDK in the image:
//
//	save_checkpoint(step, write, keep=None) -> path | None
//	    write(dir) writes the checkpoint's files into a fresh temporary directory of
//	    $TRAINSTEP_CHECKPOINT_DIR; the helper fsyncs them, writes the marker and renames the
//	    directory to step-<step> (replacing one of the same step), so a save a kill cuts short
//	    is never resumed. keep=K then deletes all but the newest K step-<N>. Only rank 0 saves
//	    (others get None): a sharded state is its framework's to save.
//	latest_checkpoint() -> path | None
//	    the newest complete checkpoint: a step-<N> with its marker, or a Hugging Face
//	    checkpoint-<N> with its trainer_state.json (written last) and no JIT-checkpoint
//	    sentinel; newest is the highest N.
//	on_sigterm(fn)
//	    on SIGTERM (a pod being stopped: preemption, eviction, a deleted TrainJob) runs fn,
//	    typically a last save_checkpoint, then exits 143; fn runs on the main thread between
//	    two of its Python statements, so keep the state it saves consistent at every statement.
//
// Before the function is called the script sets $TRAINSTEP_RESUME_FROM to latest_checkpoint()
// (unset when none) and rank 0 prints ResumedFromLine with it, and, where the Trainer serves
// progress, posts the checkpoint's name as the metric ResumedFromMetric (and with every
// report() after), so a running step's message says what it resumed from before the
// termination message does. That first post, the metric alone, is no report of the function's:
// hangTimeout does not count from it. A source that defines one of these names keeps its own.
var checkpointer = strings.NewReplacer("@DIR@", step.CheckpointDirEnv, "@FROM@", step.ResumeFromEnv,
	"@MARKER@", CheckpointMarker, "@LINE@", ResumedFromLine).Replace(`def _trainstep_checkpoints():
    import os, re
    root = os.environ.get("@DIR@")
    try:
        names = os.listdir(root) if root else []
    except OSError:
        names = []
    found = []
    for name in names:
        m = re.match(r"(step|checkpoint)-([0-9]+)$", name)
        path = os.path.join(root, name)
        if not m or os.path.exists(os.path.join(path, "checkpoint-is-incomplete.txt")):
            continue
        if os.path.isfile(os.path.join(path, "@MARKER@" if m.group(1) == "step" else "trainer_state.json")):
            found.append((int(m.group(2)), path))
    return sorted(found)


def _trainstep_latest_checkpoint():
    found = _trainstep_checkpoints()
    return found[-1][1] if found else None


def _trainstep_rank():
    import os
    for name in ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "JAX_PROCESS_ID", "DMLC_TASK_ID"):
        if os.environ.get(name):
            return os.environ[name]
    return "0"


def _trainstep_fsync(path):
    import os
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError:
        pass  # a directory some filesystems cannot fsync
    finally:
        os.close(fd)


def _trainstep_save_checkpoint(step, write, keep=None):
    import os, shutil, tempfile
    root = os.environ.get("@DIR@")
    if not root:
        raise RuntimeError("trainstep: save_checkpoint(): @DIR@ is not set; give the step a checkpoint block "
                           "(checkpoint: {volume: <a volume pod.volumeMounts mounts>}), or run it with executor run --local")
    if _trainstep_rank() != "0":
        return None
    step = int(step)
    if step < 0:
        raise ValueError("trainstep: save_checkpoint(): step must be 0 or more, not %d: it names the checkpoint step-<step>" % step)
    os.makedirs(root, exist_ok=True)
    for name in os.listdir(root):
        if name.startswith(".trainstep-"):  # a save a kill cut short
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
    tmp = tempfile.mkdtemp(prefix=".trainstep-step-%d-" % step, dir=root)
    final, old = os.path.join(root, "step-%d" % step), None
    try:
        write(tmp)
        with open(os.path.join(tmp, "@MARKER@"), "w") as f:
            f.write("%d\n" % step)
        for d, _, files in os.walk(tmp):
            for name in files:
                _trainstep_fsync(os.path.join(d, name))
            _trainstep_fsync(d)
        if os.path.exists(final):
            old = tempfile.mkdtemp(prefix=".trainstep-old-", dir=root)
            os.rename(final, os.path.join(old, "step"))
        os.rename(tmp, final)
        _trainstep_fsync(root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if old:
        shutil.rmtree(old, ignore_errors=True)
    if keep:
        for _, path in [c for c in _trainstep_checkpoints() if os.path.basename(c[1]).startswith("step-")][:-int(keep)]:
            shutil.rmtree(path, ignore_errors=True)
    return final


def _trainstep_on_sigterm(fn):
    import os, signal, sys, traceback

    def handler(signum, frame):
        print("trainstep: SIGTERM: running the on_sigterm function, then exiting", file=sys.stderr, flush=True)
        try:
            fn()
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(128 + signum)
    signal.signal(signal.SIGTERM, handler)


def _trainstep_resume():
    import os, sys
    path = _trainstep_latest_checkpoint()
    os.environ.pop("@FROM@", None)
    if path:
        os.environ["@FROM@"] = path
        if _trainstep_rank() == "0":
            print("@LINE@" + path, file=sys.stderr, flush=True)
            _trainstep_report.resumed = os.path.basename(path)[:64]
            _trainstep_report_resumed()


if "save_checkpoint" not in globals():
    save_checkpoint = _trainstep_save_checkpoint
if "latest_checkpoint" not in globals():
    latest_checkpoint = _trainstep_latest_checkpoint
if "on_sigterm" not in globals():
    on_sigterm = _trainstep_on_sigterm`)
