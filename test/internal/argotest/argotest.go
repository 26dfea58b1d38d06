// Package argotest builds executor-plugin requests with Argo's own types and calls a plugin the
// way Argo's agent does, for the Argo face's tests.
package argotest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v3/pkg/plugins/executor"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// Args is an execute request for a trainstep template. body is the YAML under plugin.trainstep.
func Args(wfName, namespace, uid, body string, opts ...func(*wfv1.Template)) (executor.ExecuteTemplateArgs, error) {
	j, err := yaml.YAMLToJSON([]byte(body))
	if err != nil {
		return executor.ExecuteTemplateArgs{}, fmt.Errorf("the step body is not YAML: %w", err)
	}
	plugin := &wfv1.Plugin{}
	if err := json.Unmarshal([]byte(`{"trainstep":`+string(j)+`}`), plugin); err != nil {
		return executor.ExecuteTemplateArgs{}, err
	}
	t := &wfv1.Template{Name: "train", Plugin: plugin}
	for _, o := range opts {
		o(t)
	}
	return executor.ExecuteTemplateArgs{
		Workflow: &executor.Workflow{ObjectMeta: executor.ObjectMeta{Name: wfName, Namespace: namespace, UID: uid}},
		Template: t,
	}, nil
}

// WithRetry adds a retryStrategy.
func WithRetry(limit int) func(*wfv1.Template) {
	return func(t *wfv1.Template) {
		l := intstr.FromInt(limit)
		t.RetryStrategy = &wfv1.RetryStrategy{Limit: &l}
	}
}

// WithTimeout sets template.timeout.
func WithTimeout(d string) func(*wfv1.Template) { return func(t *wfv1.Template) { t.Timeout = d } }

// WithOutputs declares output parameters.
func WithOutputs(names ...string) func(*wfv1.Template) {
	return func(t *wfv1.Template) {
		for _, n := range names {
			t.Outputs.Parameters = append(t.Outputs.Parameters, wfv1.Parameter{Name: n})
		}
	}
}

// Reply is an answered call.
type Reply struct {
	Status int
	Body   []byte
	executor.ExecuteTemplateReply
}

// Output returns an output parameter's value.
func (r Reply) Output(name string) (string, bool) {
	if r.Node == nil || r.Node.Outputs == nil {
		return "", false
	}
	for _, p := range r.Node.Outputs.Parameters {
		if p.Name == name && p.Value != nil {
			return p.Value.String(), true
		}
	}
	return "", false
}

// Call posts a raw body as the agent does: bearer token, JSON, 30 s client timeout.
func Call(ctx context.Context, url, token string, body []byte) (Reply, error) {
	return CallWith(ctx, &http.Client{Timeout: 30 * time.Second}, url, token, body)
}

// CallWith is Call on the HTTP client hc.
func CallWith(ctx context.Context, hc *http.Client, url, token string, body []byte) (Reply, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/api/v1/template.execute", bytes.NewReader(body))
	if err != nil {
		return Reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return Reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return Reply{}, err
	}
	r := Reply{Status: resp.StatusCode, Body: b}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, &r.ExecuteTemplateReply); err != nil {
			return r, fmt.Errorf("decoding the reply %q: %w", b, err)
		}
	}
	return r, nil
}

// Execute encodes args with Argo's types and calls.
func Execute(ctx context.Context, url, token string, args executor.ExecuteTemplateArgs) (Reply, error) {
	b, err := json.Marshal(args)
	if err != nil {
		return Reply{}, err
	}
	return Call(ctx, url, token, b)
}

// Answer is one call's reply and when it arrived.
type Answer struct {
	Reply Reply
	Err   error
	At    time.Time
}

// ExecuteAsync makes one call in the background (a held call blocks) and delivers its answer.
// The call outlives ctx's cancellation so a test can still read what it returned.
func ExecuteAsync(ctx context.Context, url, token string, args executor.ExecuteTemplateArgs) <-chan Answer {
	out := make(chan Answer, 1)
	go func() {
		r, err := Execute(context.WithoutCancel(ctx), url, token, args)
		out <- Answer{Reply: r, Err: err, At: time.Now()}
	}()
	return out
}
