package trainers

import "strings"

// OwnMetricPrefix starts the names of trainstep's own status.trainerStatus metrics
// (ResumedFromMetric, ReportsMetric): no face shows them as the function's metrics, and report()
// leaves out a metric of the function's so named.
const OwnMetricPrefix = "trainstep."

// ReportsMetric is the metric every post of report() carries, how many times rank 0 has called
// it: it tells a report of the function's from the post the command script makes as a resumed
// run starts (ResumedFromMetric alone), which is no report, so hangTimeout does not count from it.
const ReportsMetric = OwnMetricPrefix + "reports"

// reporter is the report() helper every function trainer's script defines for the training
// function (unless the source defines its own report): it posts progress, time left and metrics
// to the Trainer's status server the way the Kubeflow SDK's update_trainjob_status does
// (kubeflow/sdk#368: the env the Trainer injects, the projected token re-read at each call, the
// CA, a trainerStatus body), so a function reports without the SDK in its image:
//
//	report(progress=42, eta=720, loss=0.31, acc=0.88)
//
// Only rank 0 posts; a call within 5 s of the last one is held back (the latest one held is
// posted once at exit), except one with progress=100. Every call is a report, a bare report()
// (a heartbeat) and one whose values were all left out included: it posts the last values
// reported again (the server replaces the whole trainerStatus, so posting nothing would wipe
// what the status shows), and every post carries ReportsMetric, so it is told from the
// command script's own post as a resumed run starts. It never raises, whatever it is handed:
// report() runs inside the training function, and a progress line is never worth a failed run.
// What it posts is what the Trainer's status server takes (status.trainerStatus: whole numbers,
// metric names and values of 1 to 64 characters, at most 256 metrics; one value the server
// refuses gets the whole report refused), so a value is made to fit or left out, said once:
// progress and eta take numbers, "42%" and tensors (their item()), truncated and rounded; a
// metric value is its number written as a number (a tensor's or numpy scalar's item(), repr of a
// float, so never "tensor(0.31, grad_fn=...)"), or its text, cut to 64 characters when a str; a
// metric named with OwnMetricPrefix is trainstep's, and the function's is left out.
// Where the Trainer injected no server (its TrainJobStatus feature gate is off) it says so once
// in the log and does nothing. `executor run --local` serves the same endpoint
// (core/local/statusserver.go), with the same limits.
var reporter = strings.NewReplacer("@METRIC@", ResumedFromMetric, "@REPORTS@", ReportsMetric,
	"@PREFIX@", OwnMetricPrefix).Replace(`def _trainstep_report(progress=None, eta=None, **metrics):
    try:
        return _trainstep_report_status(progress, eta, metrics)
    except Exception as e:
        _trainstep_report_note("progress not reported: %s" % _trainstep_report_repr(e))
        return False


def _trainstep_report_status(progress, eta, metrics):
    import atexit, os, sys, time
    g = _trainstep_report
    for name in ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "JAX_PROCESS_ID", "DMLC_TASK_ID"):
        if os.environ.get(name):
            if os.environ[name] != "0":
                return False
            break
    url = os.environ.get("KUBEFLOW_TRAINER_SERVER_URL")
    if not url:
        if not getattr(g, "warned", False):
            g.warned = True
            print("trainstep: report(): progress reporting is off: the Trainer injected no KUBEFLOW_TRAINER_SERVER_URL, "
                  "so its TrainJobStatus feature gate is off on this cluster, or it predates the gate (Trainer v2.2+; turn it on: "
                  "--feature-gates=TrainJobStatus=true on the Trainer controller, or featureGates.TrainJobStatus: true in its config)", file=sys.stderr, flush=True)
        return False
    g.count = getattr(g, "count", 0) + 1
    ts = {}
    # Progress is truncated, so 99.7% is not reported as done; time left is rounded.
    p = _trainstep_report_whole("progress", progress, 100, int)
    if p is not None:
        ts["progressPercentage"] = p
    s = _trainstep_report_whole("eta", eta, 2**31 - 1, round)
    if s is not None:
        ts["estimatedRemainingSeconds"] = s
    ms = []
    for k, v in metrics.items():
        m = _trainstep_report_metric(k, v)
        if m is not None:
            ms.append(m)
    room = 256 - len(_trainstep_report_ours(g.count))
    if len(ms) > room:
        _trainstep_report_once("metrics", "%d metrics: the Trainer takes 256, %d of them trainstep's own, so the rest are left out" % (len(ms), 256 - room))
        ms = ms[:room]
    if ms:
        ts["metrics"] = ms
    if ts:
        g.values = dict(ts)
    else:
        # A heartbeat, or values all left out: the last ones again, since the server replaces the
        # whole trainerStatus and the post still says the function is alive.
        ts = dict(getattr(g, "values", None) or {})
    ts["metrics"] = list(ts.get("metrics", [])) + _trainstep_report_ours(g.count)
    ts["lastUpdatedTime"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    now = time.monotonic()
    if getattr(g, "last", None) is not None and now - g.last < 5 and ts.get("progressPercentage") != 100:
        # One exit handler for the whole run, however many 5 s windows held a call back: it
        # posts the latest one held, once.
        g.held = ts
        if not getattr(g, "atexit", False):
            g.atexit = True
            atexit.register(_trainstep_report_held)
        return False
    g.last, g.held = now, None
    return g.post(ts)


def _trainstep_report_ours(count=None):
    """trainstep's own metrics, after the function's: how many times report() was called (count;
    a post without it is the script's, no report) and the checkpoint the run resumed from. The
    server replaces the whole trainerStatus at each post, so every post carries them."""
    ours = []
    if count is not None:
        ours.append({"name": "@REPORTS@", "value": str(count)})
    resumed = getattr(_trainstep_report, "resumed", None)
    if resumed:
        ours.append({"name": "@METRIC@", "value": resumed})
    return ours


def _trainstep_report_resumed():
    """Posts, once, what the run resumed from, where the Trainer serves progress; quietly not
    where it does not (the log line says it, and the termination message). It carries no
    count: it is no report, and hangTimeout does not count from it."""
    import os, time
    try:
        if not os.environ.get("KUBEFLOW_TRAINER_SERVER_URL"):
            return False
        ts = {"metrics": _trainstep_report_ours()}
        ts["lastUpdatedTime"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        return _trainstep_report.post(ts)
    except Exception as e:
        _trainstep_report_note("resumed-from not reported: %s" % _trainstep_report_repr(e))
        return False


def _trainstep_report_held():
    g = _trainstep_report
    held, g.held = getattr(g, "held", None), None
    if held is not None:
        g.post(held)


def _trainstep_report_number(v):
    """v as a plain Python bool, int or float, or None: a tensor or numpy scalar is its item()
    (numpy 2 writes a float64 as np.float64(0.5), so numbers are made plain to be written)."""
    import numbers
    if v is None:
        return None
    item = getattr(v, "item", None)
    if callable(item) and not isinstance(v, numbers.Number):
        try:
            v = item()
        except Exception:
            return None
    if isinstance(v, bool):
        return v
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        return float(v)
    return None


def _trainstep_report_whole(what, v, hi, whole):
    """v as a whole number between 0 and hi, or None, said once, when it is none."""
    import math
    if v is None:
        return None
    n = _trainstep_report_number(v)
    if n is None and isinstance(v, str):
        text = v.strip()
        try:
            n = float(text[:-1] if text.endswith("%") else text)
        except ValueError:
            n = None
    if n is None or isinstance(n, bool) or (isinstance(n, float) and not math.isfinite(n)):
        _trainstep_report_once(what, "%s=%s left out: not a finite number" % (what, _trainstep_report_repr(v)))
        return None
    return max(0, min(hi, int(whole(n))))


def _trainstep_report_metric(name, v):
    """The trainerStatus metric for name=v, or None, said once, when the Trainer would refuse it."""
    name = str(name)
    if v is None:
        return None
    if not 0 < len(name) <= 64:
        _trainstep_report_once(name, "metric %s left out: the Trainer takes names of 1 to 64 characters" % name)
        return None
    if name.startswith("@PREFIX@"):
        _trainstep_report_once(name, "metric %s left out: names starting @PREFIX@ are trainstep's own" % name)
        return None
    n = _trainstep_report_number(v)
    if n is not None:
        text = repr(n)
        if len(text) > 64:
            try:
                text = repr(float(n))
            except OverflowError:
                pass
    elif isinstance(v, str):
        text = v if len(v) <= 64 else v[:61] + "..."
    else:
        try:
            text = str(v)
        except Exception:
            text = ""
    if not 0 < len(text) <= 64:
        _trainstep_report_once(name, "%s left out: not a number, nor a text of 1 to 64 characters the Trainer takes" % name)
        return None
    return {"name": name, "value": text}


def _trainstep_report_repr(v):
    try:
        text = repr(v)
    except Exception:
        text = "<%s>" % type(v).__name__
    return text if len(text) <= 64 else text[:61] + "..."


def _trainstep_report_once(key, msg):
    g = _trainstep_report
    said = g.__dict__.setdefault("said", set())
    if key not in said:
        said.add(key)
        _trainstep_report_note(msg + " (said once)")


def _trainstep_report_note(msg):
    import sys
    try:
        print("trainstep: report(): " + msg, file=sys.stderr, flush=True)
    except Exception:
        pass


def _trainstep_post_status(ts):
    import json, os, ssl, sys, urllib.request
    try:
        with open(os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]) as f:
            token = f.read().strip()
        ctx = ssl.create_default_context(cafile=os.environ["KUBEFLOW_TRAINER_SERVER_CA_CERT"])
        req = urllib.request.Request(os.environ["KUBEFLOW_TRAINER_SERVER_URL"], method="POST",
                                     data=json.dumps({"trainerStatus": ts}).encode(),
                                     headers={"Content-Type": "application/json", "Authorization": "Bearer " + token})
        urllib.request.urlopen(req, context=ctx, timeout=5).read()
        return True
    except Exception as e:
        print("trainstep: report(): progress not reported: %s" % e, file=sys.stderr, flush=True)
        return False


_trainstep_report.post = _trainstep_post_status
if "report" not in globals():
    report = _trainstep_report`)
