package trainers

// reporter is the report() helper every function trainer's script defines for the training
// function (unless the source defines its own report): it posts progress, time left and metrics
// to the Trainer's status server the way the Kubeflow SDK's update_trainjob_status does
// (kubeflow/sdk#368: the env the Trainer injects, the projected token re-read at each call, the
// CA, a trainerStatus body), so a function reports without the SDK in its image:
//
//	report(progress=42, eta=720, loss=0.31, acc=0.88)
//
// Only rank 0 posts; a call within 5 s of the last one is held back (the latest one held is
// posted once at exit), except one with progress=100; it never raises. Where the Trainer injected no
// server (its TrainJobStatus feature gate is off) it says so once in the log and does nothing.
// `executor run --local` serves the same endpoint (core/local/statusserver.go).
const reporter = `def _trainstep_report(progress=None, eta=None, **metrics):
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
    ts = {"lastUpdatedTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if progress is not None:
        ts["progressPercentage"] = max(0, min(100, int(progress)))
    if eta is not None:
        ts["estimatedRemainingSeconds"] = max(0, int(eta))
    if metrics:
        ts["metrics"] = [{"name": str(k), "value": str(v)} for k, v in metrics.items()]
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


def _trainstep_report_held():
    g = _trainstep_report
    held, g.held = getattr(g, "held", None), None
    if held is not None:
        g.post(held)


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
    report = _trainstep_report`
