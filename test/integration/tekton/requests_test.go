package tekton_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/trainstep/trainstep/plugin/tekton"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// requestLog records every request a client makes, through a wrapping RoundTripper.
type requestLog struct {
	mu    sync.Mutex
	reqs  []string // "GET /apis/...?watch=true"
	codes []int    // the response's status code, 0 when there was none
}

func (l *requestLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		res, err := rt.RoundTrip(r)
		code := 0
		if res != nil {
			code = res.StatusCode
		}
		l.mu.Lock()
		l.reqs = append(l.reqs, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
		l.codes = append(l.codes, code)
		l.mu.Unlock()
		return res, err
	})
}

// matching are the recorded requests of this method whose path matches, with their codes.
func (l *requestLog) matching(method string, path *regexp.Regexp) (reqs []string, codes []int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, r := range l.reqs {
		m, target, _ := strings.Cut(r, " ")
		p, _, _ := strings.Cut(target, "?")
		if m == method && path.MatchString(p) {
			reqs, codes = append(reqs, r), append(codes, l.codes[i])
		}
	}
	return reqs, codes
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

// listsBeyondTheFirstFill are the LISTs of a resource other than its informer's first fill: an
// apiserver that serves watch-list (1.36 here) gets none, one that does not (1.33 here) gets the
// informer's one LIST at resourceVersion=0. Any other LIST is a read the cache should have
// answered, which these tests refuse.
func (l *requestLog) listsBeyondTheFirstFill(resource string) []string {
	lists := l.lists(resource)
	for i, r := range lists {
		if strings.Contains(r, "resourceVersion=0") {
			return append(lists[:i:i], lists[i+1:]...)
		}
	}
	return lists
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
		assert.Empty(t, log.listsBeyondTheFirstFill(resource), "%d plans, and %s never listed outside the informer", runs, resource)
		assert.NotEmpty(t, log.watches(resource), "the %s informer watches", resource)
	}
}

// TestRequestsPerStep holds the controller to its request budget of at most six requests per
// step: one TrainJob create (no read before it: the cache said there is none; none after it: the
// watch brings it), at most one TrainJob patch (the started-at annotation, once the job started:
// none for a job first seen finished), at most three status writes (started with the TrainJob's
// name, running, finished) and none refused for a stale read, and one Event (the finish).
// Everything else comes from watches.
func TestRequestsPerStep(t *testing.T) {
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
	// Events are sent in the background after the write they report.
	var evs []string
	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		evs, _ = log.matching("POST", regexp.MustCompile(`/namespaces/`+ns+`/events$`))
		assert.Len(ct, evs, runs, "one Event per step")
	}, testenv.Timeout, testenv.Interval)

	creates, _ := log.matching("POST", regexp.MustCompile(`/namespaces/`+ns+`/trainjobs$`))
	assert.Len(t, creates, runs, "one TrainJob create per step")
	reads, _ := log.matching("GET", regexp.MustCompile(`/trainjobs/[^/]+$`))
	assert.Empty(t, reads, "no TrainJob read from the apiserver")
	writes, codes := log.matching("PUT", regexp.MustCompile(`/namespaces/`+ns+`/customruns/[^/]+/status$`))
	assert.LessOrEqual(t, len(writes), 3*runs, "status writes: %v", writes)
	assert.NotContains(t, codes, http.StatusConflict, "a status write on a stale read")
	patches, _ := log.matching("PATCH", regexp.MustCompile(`/namespaces/`+ns+`/trainjobs/[^/]+$`))
	assert.LessOrEqual(t, len(patches), runs, "at most one started-at patch per step: %v", patches)
	all := len(creates) + len(patches) + len(writes) + len(evs)
	t.Logf("%d steps: %d creates, %d started-at patches, %d status writes, %d Events", runs, len(creates), len(patches), len(writes), len(evs))
	assert.LessOrEqual(t, all, 6*runs, "requests per step: %d creates, %d patches, %d status writes, %d Events", len(creates), len(patches), len(writes), len(evs))
	for _, resource := range []string{"customruns", "trainjobs", "pods", "events"} {
		assert.Empty(t, log.listsBeyondTheFirstFill(resource), "%s only watched, never listed per step", resource)
	}
}
