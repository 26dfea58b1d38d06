package cli_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/trainstep/trainstep/internal/cli"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// A step whose TrainJob the apiserver cannot create (a validating webhook whose Service has no
// endpoint: every create is a 500) is tried again with back-off until its timeout, then ends
// timed out, with nothing created, as the reproduction ran it: `timeout: 20s`.
func TestACreateThatKeepsFailingEndsAtTheTimeout(t *testing.T) {
	ns := env.Namespace(t)
	hook := &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "no-endpoint-" + ns},
		Webhooks: []admissionv1.ValidatingWebhook{{
			Name: "no-endpoint.trainstep.test",
			// Nothing listens on port 1: the call fails, and with failurePolicy Fail so does the create.
			ClientConfig:            admissionv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/validate")},
			Rules:                   []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Create}, Rule: admissionv1.Rule{APIGroups: []string{"trainer.kubeflow.org"}, APIVersions: []string{"*"}, Resources: []string{"trainjobs"}}}},
			FailurePolicy:           ptr.To(admissionv1.Fail),
			SideEffects:             ptr.To(admissionv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](2),
			// This test's namespace alone: the package's other tests create TrainJobs beside it.
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
		}},
	}
	require.NoError(t, env.Client.Create(t.Context(), hook))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), hook) })

	r := executorWithin(t, 2*time.Minute, onCluster(ns, writeStep(t, "framework: jax\ntimeout: 20s\ntrainer: {func: \"def f(): pass\"}"))...)
	assert.Equal(t, cli.ExitTimedOut, r.code, r.stderr)
	assert.Equal(t, "TimedOut", r.outputs["phase"])
	assert.Equal(t, "Timeout", r.outputs["reason"])
	assert.Contains(t, r.outputs["message"], "timeout of 20s passed before its TrainJob was created")
	assert.Equal(t, "timeout", r.outputs["failure-class"])
	assert.Contains(t, r.stderr, "retrying with back-off", "it said why it waited")
	assert.Empty(t, testenv.TrainJobs(t.Context(), t, env.Client, ns), "nothing was created")
}
