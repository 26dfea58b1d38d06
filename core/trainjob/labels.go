package trainjob

// Labels and annotations trainstep puts on every TrainJob it creates.
const (
	LabelManagedBy     = "app.kubernetes.io/managed-by"
	ManagedByValue     = "trainstep"
	LabelEngine        = "trainstep.dev/engine"
	LabelOwnerUID      = "trainstep.dev/owner-uid"
	LabelStep          = "trainstep.dev/step"
	LabelAttempt       = "trainstep.dev/attempt"
	LabelRun           = "trainstep.dev/run"
	LabelFramework     = "trainstep.dev/framework"
	LabelNumNodes      = "trainstep.dev/num-nodes"
	AnnotationStepKey  = "trainstep.dev/step-key"
	AnnotationOwnerUID = "trainstep.dev/owner-uid"
	AnnotationTrainer  = "trainstep.dev/trainer"
	LabelKueueQueue    = "kueue.x-k8s.io/queue-name"
)

// LabelEngineAttempt is the engine's attempt (Argo's {{retries}}, …) that a TrainJob of the
// step's own retries belongs to, which its LabelAttempt is not (Identity.EngineAttempt). A job
// without it belongs to the engine attempt LabelAttempt says.
const LabelEngineAttempt = "trainstep.dev/engine-attempt"

// The step cache's key on the TrainJob a step with a cache block creates (core/stepcache): the
// whole key as an annotation, read by the look that sees the job succeed to store its outputs
// (so cached TrainJobs keep it, TrimTrainJob); its first 40 characters as a label, to find the
// job by.
const (
	AnnotationCacheKey = "trainstep.dev/cache-key"
	LabelCacheKey      = "trainstep.dev/cache-key"
)

// AnnotationStartedAt is the annotation a face puts on a TrainJob, once, when it first sees it
// started (Observation.Started): when, in RFC 3339. It is how any face, restarted or not, knows
// that startTimeout no longer applies: the Trainer keeps no Running condition and its jobsStatus
// counts the present, not the past.
const AnnotationStartedAt = "trainstep.dev/started-at"
