package argo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/argoproj/argo-workflows/v3/pkg/plugins/executor"
	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/trainstep/trainstep/core/message"
)

// ExecutePath is the one method of Argo's executor plugin API.
const ExecutePath = "/api/v1/template.execute"

// Handler serves the execute path, /healthz and /readyz. Unknown paths are 404; the execute path
// never is (a 404 disables the plugin for the rest of the workflow). /metrics is served apart, by
// MetricsHandler, on the metrics address (loopback by default).
func (p *Plugin) Handler() http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.HandleMethodNotAllowed = true
	r.Use(gin.CustomRecovery(func(c *gin.Context, err any) {
		p.log.Error("panic in a request", "path", c.Request.URL.Path, "error", fmt.Sprint(err))
		c.AbortWithStatusJSON(http.StatusInternalServerError, gin.H{"error": "internal error"})
	}))
	exec := &executeHandler{p: p, calls: newCallMemo()}
	r.POST(ExecutePath, exec.serve)
	r.GET("/healthz", func(c *gin.Context) { c.String(http.StatusOK, "ok") })
	r.GET("/readyz", func(c *gin.Context) {
		if !p.Synced(c.Request.Context()) {
			c.String(http.StatusServiceUnavailable, "informer cache not synced")
			return
		}
		c.String(http.StatusOK, "ok")
	})
	return r
}

// MetricsHandler serves /metrics.
func (p *Plugin) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(p.metrics.registry, promhttp.HandlerOpts{}))
	return mux
}

// Server timeouts. The agent is the only client of the execute API and sits in the same pod.
const (
	// readHeaderTimeout bounds a client that opens a connection and sends a request slowly.
	readHeaderTimeout = 5 * time.Second
	// readTimeout bounds reading a whole request, the body (up to MaxBody) included.
	readTimeout = 15 * time.Second
	// writeTimeout counts from the end of the headers: the body read, then a held call (the
	// handler gives up at agentTimeout-2s whatever --hold-max says), then the reply.
	writeTimeout = readTimeout + agentTimeout
	// idleTimeout closes kept-alive connections the agent no longer uses.
	idleTimeout = 90 * time.Second
)

// newServer is an HTTP server with every timeout set; requests inherit ctx.
func newServer(ctx context.Context, h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
}

// MetricsAddr is the address /metrics is served on once Serve runs ("" when off or not yet).
func (p *Plugin) MetricsAddr() string {
	if a, ok := p.metricsAddr.Load().(string); ok {
		return a
	}
	return ""
}

// executeHandler serves the execute path. The agent sends a tracked step's request again and
// again, byte for byte, every requeue: the handler keeps what each body parsed to (calls), so a
// status call decodes no JSON and parses no step spec.
type executeHandler struct {
	p      *Plugin
	calls  *callMemo
	synced atomic.Bool // the cache has listed once; it stays listed
}

func (h *executeHandler) serve(c *gin.Context) {
	p := h.p
	start := time.Now()
	ok, err := p.tokens.allows(c.GetHeader("Authorization"))
	if err != nil {
		p.log.Error("cannot check the agent's token", "error", err)
	}
	if !ok {
		p.count(outcomeForbidden)
		c.AbortWithStatusJSON(http.StatusForbidden, gin.H{"error": "missing or wrong bearer token"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, p.opts.MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			p.count(outcomeTooLarge)
			c.AbortWithStatusJSON(http.StatusRequestEntityTooLarge, gin.H{"error": fmt.Sprintf("request body over %d bytes", p.opts.MaxBody)})
			return
		}
		p.count(outcomeBadRequest)
		c.AbortWithStatusJSON(http.StatusBadRequest, gin.H{"error": "reading the request: " + err.Error()})
		return
	}
	call, ok := h.calls.get(body)
	if !ok {
		var args executor.ExecuteTemplateArgs
		if err := json.Unmarshal(body, &args); err != nil {
			p.count(outcomeBadRequest)
			c.AbortWithStatusJSON(http.StatusBadRequest, gin.H{"error": "decoding the request: " + err.Error()})
			return
		}
		if args.Template == nil {
			p.count(outcomeBadRequest)
			c.AbortWithStatusJSON(http.StatusBadRequest, gin.H{"error": "the request has no template"})
			return
		}
		call = p.parseCall(args)
		h.calls.put(body, call)
	}
	// The agent gives up on a call after 30 s; never hold one that long.
	ctx, cancel := context.WithTimeout(c.Request.Context(), agentTimeout-2*time.Second)
	defer cancel()
	res := p.execute(ctx, call, h.ready)
	h.record(call, res, start)
	c.JSON(http.StatusOK, res.reply)
}

// record counts a call's outcome and hold, and logs it: one line a call, none for a foreign one.
func (h *executeHandler) record(call *call, res result, start time.Time) {
	p := h.p
	p.count(res.outcome)
	p.metrics.hold.Observe(res.held.Seconds())
	if res.notice != nil {
		p.metrics.notice.Observe(res.notice.Seconds())
	}
	if res.outcome == outcomeForeign {
		return
	}
	attrs := []any{"outcome", res.outcome, "duration", time.Since(start).String(), "template", call.template}
	if call.workflow != "" {
		attrs = append(attrs, "workflow", call.workflow)
	}
	if res.req != nil {
		attrs = append(attrs, "step", res.req.Key, "attempt", res.req.Attempt)
	}
	if res.trainJob != "" {
		attrs = append(attrs, "trainjob", res.trainJob)
	}
	if res.reply.Node != nil {
		attrs = append(attrs, "message", message.FirstLine(res.reply.Node.Message))
	}
	p.log.Info("execute", attrs...)
}

// ready waits for the cache's first list (up to syncWait), once: informers stay listed.
func (h *executeHandler) ready(ctx context.Context) bool {
	if h.synced.Load() {
		return true
	}
	if !h.p.waitSynced(ctx, h.p.syncWait()) {
		return false
	}
	h.synced.Store(true)
	return true
}

// Bounds of the parsed-request memo. A sidecar serves one workflow, whose steps are a few dozen
// bodies of a few KB; the bounds only stop a namespace-wide sidecar or abuse from growing it.
const (
	memoMaxCalls = 1024
	memoMaxBytes = 4 << 20
	memoMaxBody  = 64 << 10
)

// callMemo maps a request body to what it parsed to. Parsing is a pure function of the body
// (and the plugin's options), so a remembered call is the same answer the parse would give.
type callMemo struct {
	mu    sync.RWMutex
	calls map[string]*call
	bytes int
}

func newCallMemo() *callMemo { return &callMemo{calls: map[string]*call{}} }

func (m *callMemo) get(body []byte) (*call, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	c, ok := m.calls[string(body)]
	return c, ok
}

func (m *callMemo) put(body []byte, c *call) {
	if len(body) > memoMaxBody {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.calls[string(body)]; ok {
		return
	}
	// Over a bound, forget arbitrary calls (map order): a forgotten one is parsed again.
	for k := range m.calls {
		if len(m.calls) < memoMaxCalls && m.bytes+len(body) <= memoMaxBytes {
			break
		}
		delete(m.calls, k)
		m.bytes -= len(k)
	}
	m.calls[string(body)] = c
	m.bytes += len(body)
}

func (p *Plugin) count(outcome string) { p.metrics.calls.WithLabelValues(outcome).Inc() }

// Run binds the address first (the agent retries a refused connection for only about 15 s), then
// starts the cache, serves until ctx ends, and on the way out cleans up after workflows that
// stopped (the agent pod gets SIGTERM when its workflow completes).
func (p *Plugin) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", p.opts.Addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", p.opts.Addr, err)
	}
	return p.Serve(ctx, ln)
}

// Serve is Run on a listener the caller opened. It also opens the metrics address, unless off.
func (p *Plugin) Serve(ctx context.Context, ln net.Listener) error {
	// Requests inherit ctx, so held calls are answered (in progress, with a requeue) on shutdown.
	srv := newServer(ctx, p.Handler())
	servers := []*http.Server{srv}
	errc := make(chan error, 2)
	if p.opts.MetricsAddr != MetricsOff {
		mln, err := net.Listen("tcp", p.opts.MetricsAddr)
		if err != nil {
			return fmt.Errorf("listening on %s for metrics (--metrics-addr, %q turns them off): %w", p.opts.MetricsAddr, MetricsOff, err)
		}
		p.metricsAddr.Store(mln.Addr().String())
		msrv := newServer(ctx, p.MetricsHandler())
		servers = append(servers, msrv)
		go func() { errc <- msrv.Serve(mln) }()
	}
	go func() { errc <- srv.Serve(ln) }()
	p.log.Info("serving the Argo executor plugin", "addr", ln.Addr().String(), "metricsAddr", p.MetricsAddr(), "namespace", p.opts.Namespace, "key", p.opts.Key,
		"holdMax", p.opts.HoldMax.String(), "maxHeld", p.opts.MaxHeld, "requeue", p.opts.Requeue.String())
	if err := p.Start(ctx); err != nil {
		for _, s := range servers {
			_ = s.Close()
		}
		return err
	}
	select {
	case err := <-errc:
		return fmt.Errorf("serving the Argo executor plugin: %w", err)
	case <-ctx.Done():
	}
	// Shutdown and the sweep get their own time: ctx is already done.
	done, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
	defer cancel()
	var errs []error
	if err := p.Sweep(done); err != nil {
		errs = append(errs, err)
	}
	for _, s := range servers {
		if err := s.Shutdown(done); err != nil {
			errs = append(errs, fmt.Errorf("stopping the HTTP server: %w", err))
		}
	}
	return errors.Join(errs...)
}
