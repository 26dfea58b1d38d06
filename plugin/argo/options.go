// Package argo is trainstep's Argo Workflows face: an executor plugin that the Argo agent calls
// over HTTP for every plugin template. It translates Argo's request into the shared step path
// (step.Parse → Planner.Plan → Plan.TrainJob → Submit → Observe → Outputs) and the observation
// back into Argo's reply. Nothing outside plugin/ imports Argo or gin.
package argo

import (
	"fmt"
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/core/trainjob"
)

// Defaults, documented in the README.
const (
	DefaultAddr = ":7356"
	// DefaultMetricsAddr keeps /metrics on the pod's loopback: reachable from the agent pod's own
	// containers, not from the network.
	DefaultMetricsAddr = "127.0.0.1:7357"
	// MetricsOff as the metrics address serves no metrics.
	MetricsOff       = "off"
	DefaultTokenFile = "/var/run/argo/token"
	DefaultKey       = "trainstep"
	DefaultHoldMax   = 20 * time.Second
	DefaultMaxHeld   = 8
	DefaultRequeue   = 5 * time.Second
	// DefaultMaxBody is above anything etcd can store (1.5 MiB objects), so only abuse hits it.
	DefaultMaxBody = 8 << 20
	// DefaultQPS and DefaultBurst are Argo's workflow-controller's own client limits.
	DefaultQPS   = 20
	DefaultBurst = 30
	// agentTimeout is the Argo agent's HTTP client timeout per call.
	agentTimeout = 30 * time.Second
	// Engine is the identity engine of TrainJobs this face creates.
	Engine = "argo"
)

// Options configure the plugin. Zero values take the defaults.
type Options struct {
	// Addr is where the HTTP server listens.
	Addr string
	// MetricsAddr is where /metrics is served, apart from the execute API; MetricsOff serves none.
	// It is unauthenticated: bind it beyond loopback only where the network is trusted.
	MetricsAddr string
	// TokenFile holds the bearer token the agent sends; it is re-read when it changes.
	TokenFile string
	// Key is the plugin key of the templates this plugin answers: plugin: {<key>: {...}}.
	Key string
	// Namespace is the one namespace served (the agent pod's own). Required.
	Namespace string
	// Workflow, when set, narrows the Workflow watch to the one workflow whose agent pod hosts
	// this sidecar (from the downward API); empty watches every workflow of the namespace.
	Workflow string
	// HoldMax is the longest an execute call is held open waiting for the TrainJob to finish; 0
	// never holds. It must stay well inside the agent's 30 s client timeout.
	HoldMax time.Duration
	// MaxHeld caps the calls held at once: each held call occupies one of the agent's task
	// workers (16 by default), so a workflow with many parallel steps still gets served.
	MaxHeld int
	// Requeue is the delay the agent waits before calling again about an unfinished step.
	Requeue time.Duration
	// MaxBody is the largest request body accepted.
	MaxBody int64
	// QPS and Burst bound the plugin's apiserver client. client-go's default, 5 per second,
	// queues a wide fan-out's creates behind its start records (one PATCH per step): 1,000
	// steps would wait 400 s. The default is Argo's own workflow-controller's (20, burst 30).
	QPS   float32
	Burst int
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// Logs reads failing nodes' log tails; nil reads them through the apiserver (kubelet).
	Logs trainjob.LogSource
}

// Default fills the zero fields.
func (o *Options) Default() {
	if o.Addr == "" {
		o.Addr = DefaultAddr
	}
	if o.MetricsAddr == "" {
		o.MetricsAddr = DefaultMetricsAddr
	}
	if o.TokenFile == "" {
		o.TokenFile = DefaultTokenFile
	}
	if o.Key == "" {
		o.Key = DefaultKey
	}
	if o.MaxHeld == 0 {
		o.MaxHeld = DefaultMaxHeld
	}
	if o.Requeue == 0 {
		o.Requeue = DefaultRequeue
	}
	if o.MaxBody == 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.QPS == 0 {
		o.QPS = DefaultQPS
	}
	if o.Burst == 0 {
		o.Burst = DefaultBurst
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports every bad setting, naming it.
func (o Options) Validate() error {
	var errs field.ErrorList
	if o.Namespace == "" {
		errs = append(errs, field.Required(field.NewPath("namespace"), "the namespace the plugin serves (the agent pod's namespace)"))
	}
	if o.HoldMax < 0 || o.HoldMax > agentTimeout-5*time.Second {
		errs = append(errs, field.Invalid(field.NewPath("holdMax"), o.HoldMax.String(),
			fmt.Sprintf("must be between 0 and %s, well inside the agent's %s client timeout", agentTimeout-5*time.Second, agentTimeout)))
	}
	if o.MaxHeld < 0 {
		errs = append(errs, field.Invalid(field.NewPath("maxHeld"), o.MaxHeld, "must not be negative"))
	}
	if o.QPS < 0 {
		errs = append(errs, field.Invalid(field.NewPath("qps"), o.QPS, "must not be negative"))
	}
	if o.Burst < 0 {
		errs = append(errs, field.Invalid(field.NewPath("burst"), o.Burst, "must not be negative"))
	}
	if o.Requeue < time.Second {
		errs = append(errs, field.Invalid(field.NewPath("requeue"), o.Requeue.String(), "must be at least 1s (a zero requeue makes the agent never call again)"))
	}
	if o.MaxBody < 1024 {
		errs = append(errs, field.Invalid(field.NewPath("maxBody"), o.MaxBody, "must be at least 1024 bytes"))
	}
	return errs.ToAggregate()
}
