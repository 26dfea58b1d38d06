package argo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/argoproj/argo-workflows/v3/pkg/plugins/executor"
	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/trainstep/trainstep/core/message"
)

// ExecutePath is the one method of Argo's executor plugin API.
const ExecutePath = "/api/v1/template.execute"

// Handler serves the execute path, /healthz, /readyz and /metrics. Unknown paths are 404; the
// execute path never is (a 404 disables the plugin for the rest of the workflow).
func (p *Plugin) Handler() http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.HandleMethodNotAllowed = true
	r.Use(gin.CustomRecovery(func(c *gin.Context, err any) {
		p.log.Error("panic in a request", "path", c.Request.URL.Path, "error", fmt.Sprint(err))
		c.AbortWithStatusJSON(http.StatusInternalServerError, gin.H{"error": "internal error"})
	}))
	r.POST(ExecutePath, p.handleExecute)
	r.GET("/healthz", func(c *gin.Context) { c.String(http.StatusOK, "ok") })
	r.GET("/readyz", func(c *gin.Context) {
		if !p.Synced(c.Request.Context()) {
			c.String(http.StatusServiceUnavailable, "informer cache not synced")
			return
		}
		c.String(http.StatusOK, "ok")
	})
	r.GET("/metrics", gin.WrapH(promhttp.HandlerFor(p.metrics.registry, promhttp.HandlerOpts{})))
	return r
}

func (p *Plugin) handleExecute(c *gin.Context) {
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
	// The agent gives up on a call after 30 s; never hold one that long.
	ctx, cancel := context.WithTimeout(c.Request.Context(), agentTimeout-2*time.Second)
	defer cancel()
	res := p.executeTemplate(ctx, args)
	p.count(res.outcome)
	p.metrics.hold.Observe(res.held.Seconds())
	if res.notice != nil {
		p.metrics.notice.Observe(res.notice.Seconds())
	}
	if res.outcome != outcomeForeign {
		attrs := []any{"outcome", res.outcome, "duration", time.Since(start).String(), "template", args.Template.Name}
		if args.Workflow != nil {
			attrs = append(attrs, "workflow", args.Workflow.ObjectMeta.Namespace+"/"+args.Workflow.ObjectMeta.Name)
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
	c.JSON(http.StatusOK, res.reply)
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

// Serve is Run on a listener the caller opened.
func (p *Plugin) Serve(ctx context.Context, ln net.Listener) error {
	// Requests inherit ctx, so held calls are answered (in progress, with a requeue) on shutdown.
	srv := &http.Server{Handler: p.Handler(), ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	p.log.Info("serving the Argo executor plugin", "addr", ln.Addr().String(), "namespace", p.opts.Namespace, "key", p.opts.Key,
		"holdMax", p.opts.HoldMax.String(), "maxHeld", p.opts.MaxHeld, "requeue", p.opts.Requeue.String())
	if err := p.Start(ctx); err != nil {
		_ = srv.Close()
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
	if err := srv.Shutdown(done); err != nil {
		errs = append(errs, fmt.Errorf("stopping the HTTP server: %w", err))
	}
	return errors.Join(errs...)
}
