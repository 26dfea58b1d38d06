package tekton_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/trainstep/trainstep/plugin/tekton"
)

// requestLog records every request a client makes, through a wrapping RoundTripper.
type requestLog struct {
	mu   sync.Mutex
	reqs []string // "GET /apis/...?watch=true"
}

func (l *requestLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		l.mu.Lock()
		l.reqs = append(l.reqs, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
		l.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// watches are the recorded watches of a resource.
func (l *requestLog) watches(resource string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.reqs {
		path, query, _ := strings.Cut(r, "?")
		if strings.HasSuffix(path, "/"+resource) && strings.Contains(query, "watch=true") {
			out = append(out, r)
		}
	}
	return out
}

// lists are the recorded LISTs (GETs of a collection that are not watches) of a resource.
func (l *requestLog) lists(resource string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.reqs {
		path, query, _ := strings.Cut(r, "?")
		if strings.HasPrefix(path, "GET ") && strings.HasSuffix(path, "/"+resource) && !strings.Contains(query, "watch=true") {
			out = append(out, r)
		}
	}
	return out
}

// TestPlansReadRuntimesFromTheCache: however many CustomRuns are planned, the controller makes no
// LIST of runtimes: its informers fill the cache with a watch (client-go's watch-list streams the
// initial state; on an apiserver without it, the informer's one first LIST).
func TestPlansReadRuntimesFromTheCache(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	log := &requestLog{}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(log.wrap)
	startControllerAs(t, cfg, ns)
	const runs = 4
	for i := range runs {
		create(t, jaxRun(t, ns, fmt.Sprintf("run-%d", i), "succeed"))
	}
	for i := range runs {
		waitRun(t, ns, fmt.Sprintf("run-%d", i), succeeded(corev1.ConditionTrue, tekton.ReasonSucceeded))
	}
	for _, resource := range []string{"clustertrainingruntimes", "trainingruntimes"} {
		assert.Empty(t, log.lists(resource), "%d plans, and %s never listed outside the informer", runs, resource)
		assert.NotEmpty(t, log.watches(resource), "the %s informer watches", resource)
	}
}
