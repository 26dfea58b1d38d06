package image_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/core/trainjob"
	"github.com/trainstep/trainstep/internal/manifest"
	"github.com/trainstep/trainstep/internal/version"
	"github.com/trainstep/trainstep/plugin/argo"
	"github.com/trainstep/trainstep/plugin/tekton"
	"github.com/trainstep/trainstep/plugin/tekton/api/v1beta1"
	"github.com/trainstep/trainstep/test/internal/argotest"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// amd64 is the amd64 image of the release and its config.
func amd64(t *testing.T) (rootfs string, cfg *v1.ConfigFile) {
	t.Helper()
	img := platformImage(t, index(t, filepath.Join(dist, "image")), "linux/amd64")
	c, err := img.ConfigFile()
	require.NoError(t, err)
	return unpack(t, img), c
}

// `executor version` from the image, as its user: what the labels say.
func TestImageRunsExecutorVersion(t *testing.T) {
	rootfs, cfg := amd64(t)
	r := start(t, rootfs, cfg, pod{Namespace: "default", Name: "version"}, corev1.Container{Name: "version", Args: []string{"version", "-o", "json"}})
	require.Equal(t, 0, r.wait(t), r.Log.String())
	var got version.Info
	require.NoError(t, json.Unmarshal([]byte(r.Log.String()), &got), r.Log.String())
	l := cfg.Config.Labels
	assert.Equal(t, version.Info{
		Version: l["org.opencontainers.image.version"], Commit: l["org.opencontainers.image.revision"], GoVersion: l["dev.trainstep.go-version"],
		Platform: "linux/amd64",
		Trainer:  strings.TrimPrefix(l["dev.trainstep.api.trainer"], version.TrainerModule+"@"),
		Argo:     strings.TrimPrefix(l["dev.trainstep.api.argo"], version.ArgoModule+"@"),
		Tekton:   strings.TrimPrefix(l["dev.trainstep.api.tekton"], "github.com/tektoncd/pipeline@"),
	}, got)
	assert.Equal(t, stampVersion, got.Version)
}

// ensureNamespace creates namespace ns (the workflow namespace the Argo face installs into, which
// its user makes) unless it exists.
func ensureNamespace(t *testing.T, ns string) {
	t.Helper()
	if err := c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}

// objects are the objects of an install file.
func objects(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	objs := decode(t, b)
	require.NotEmpty(t, objs, "%s holds no object", file)
	return objs
}

// install applies an install file as `kubectl apply --server-side -f` does.
func install(t *testing.T, face string) []*unstructured.Unstructured {
	t.Helper()
	objs := objects(t, filepath.Join(dist, "install-"+face+".yaml"))
	_, err := manifest.Apply(t.Context(), c, objs, "")
	require.NoError(t, err)
	return objs
}

// releaseImage is the release's image, pinned by digest, as its install files name it.
func releaseImage(t *testing.T) string {
	t.Helper()
	digest, err := os.ReadFile(filepath.Join(dist, "image", "digest"))
	require.NoError(t, err)
	return repository + "@" + strings.TrimSpace(string(digest))
}

// deployment reads a Deployment the install file created and its pod as the kubelet gets it.
func deployment(t *testing.T, ns, name string) (pod, corev1.Container) {
	t.Helper()
	d := &appsv1.Deployment{}
	require.NoError(t, c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: name}, d))
	spec := d.Spec.Template.Spec
	require.Len(t, spec.Containers, 1)
	return pod{Namespace: ns, Name: name + "-0", Labels: d.Spec.Template.Labels, ServiceAccount: spec.ServiceAccountName,
		SecurityContext: spec.SecurityContext}, spec.Containers[0]
}

// install-tekton.yaml applied, its controller Deployment's container started from the image as
// its ServiceAccount: a CustomRun naming TrainStep runs to Succeeded with its results.
func TestReleaseTektonInstallRunsAStepFromTheImage(t *testing.T) {
	install(t, "tekton")
	tektonRunsAStep(t, "trainstep-system", "trainstep-tekton-controller", releaseImage(t))
}

// exampleStep is the README's first example, examples/steps/hello-xgboost.yaml, as the user has
// it: each face installed runs it.
func exampleStep(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "examples", "steps", "hello-xgboost.yaml"))
	require.NoError(t, err)
	return string(b)
}

// tektonRunsAStep starts the container of the Tekton controller's Deployment ns/name from the
// image as its ServiceAccount, and runs a CustomRun naming TrainStep with the README's first
// example to Succeeded. The Deployment names image.
func tektonRunsAStep(t *testing.T, ns, name, image string) {
	t.Helper()
	p, ctr := deployment(t, ns, name)
	assert.Equal(t, image, ctr.Image, "the controller's image")
	rootfs, cfg := amd64(t)
	r := start(t, rootfs, cfg, p, ctr)
	r.ready(t, ctr)

	runNS := stack.Namespace(t)
	run := &v1beta1.CustomRun{
		ObjectMeta: metav1.ObjectMeta{Name: "train"},
		Spec: v1beta1.CustomRunSpec{
			CustomRef: &v1beta1.TaskRef{APIVersion: tekton.APIVersion, Kind: tekton.Kind},
			Params:    []v1beta1.Param{{Name: "step", Value: v1beta1.ParamValue{Type: v1beta1.ParamTypeString, StringVal: exampleStep(t)}}},
		},
	}
	run.APIVersion, run.Kind, run.Namespace = v1beta1.GroupVersion.String(), "CustomRun", runNS
	require.NoError(t, c.Create(t.Context(), run))
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		got := &v1beta1.CustomRun{}
		require.NoError(ct, c.Get(t.Context(), client.ObjectKeyFromObject(run), got))
		var cond string
		for _, cd := range got.Status.Conditions {
			if cd.Type == v1beta1.ConditionSucceeded {
				cond = string(cd.Status) + " " + cd.Reason
			}
		}
		assert.Equal(ct, "True "+tekton.ReasonSucceeded, cond)
	}, stepTimeout, testenv.Interval, "the CustomRun did not succeed; controller log:\n%s", tail(r.Log.String(), 30))
	tjs := testenv.TrainJobs(t.Context(), t, stack.Client, runNS)
	require.Len(t, tjs, 1)
	assert.Equal(t, tekton.Engine, tjs[0].Labels[trainjob.LabelEngine])
}

// install-argo.yaml applied (into its workflow namespace, which the user makes first): the
// executor plugin's sidecar, as its ConfigMap says, started from the image as the agent pod
// would run it (its ServiceAccount, uid 8737 gid 0, the token argoexec writes) answers
// template.execute until the step succeeds; the janitor's Deployment runs from the image too.
func TestReleaseArgoInstallRunsAStepFromTheImage(t *testing.T) {
	const ns = "ml"
	ensureNamespace(t, ns)
	install(t, "argo")
	argoRunsAStep(t, ns, ns, "trainstep-argo-janitor", releaseImage(t))
}

// argoRunsAStep (with the README's first example as the step) starts the janitor of the Deployment janitorNS/janitorName from the image to
// ready, and the plugin's sidecar from its ConfigMap in the workflow namespace ns as the agent
// pod would run it, which answers template.execute until the step succeeds. Both name image.
func argoRunsAStep(t *testing.T, ns, janitorNS, janitorName, image string) {
	t.Helper()
	janitorPod, janitor := deployment(t, janitorNS, janitorName)
	assert.Equal(t, image, janitor.Image, "the janitor's image")
	jroot, cfg := amd64(t)
	start(t, jroot, cfg, janitorPod, janitor).ready(t, janitor)

	wf := &wfv1.Workflow{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "wf-"},
		Spec:   wfv1.WorkflowSpec{Entrypoint: "main", Templates: []wfv1.Template{{Name: "main", Suspend: &wfv1.SuspendTemplate{}}}},
		Status: wfv1.WorkflowStatus{Phase: wfv1.WorkflowRunning, StartedAt: metav1.NewTime(time.Now().Add(-time.Minute))}}
	require.NoError(t, c.Create(t.Context(), wf))

	cm := &corev1.ConfigMap{}
	require.NoError(t, c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: "trainstep-executor-plugin"}, cm))
	var sidecar corev1.Container
	require.NoError(t, yaml.UnmarshalStrict([]byte(cm.Data["sidecar.container"]), &sidecar))
	assert.Equal(t, image, sidecar.Image, "the plugin sidecar's image")
	require.Equal(t, "true", cm.Data["sidecar.automountServiceAccountToken"])
	const token = "the-agent-token"
	p := pod{Namespace: ns, Name: wf.Name + "-1340600742-agent", Labels: map[string]string{"workflows.argoproj.io/workflow": wf.Name},
		ServiceAccount: "trainstep-executor-plugin",
		// What `argoexec agent init` writes for the sidecar (uid 8737, gid 0, 0440).
		Files: []podFile{{Path: argo.DefaultTokenFile, Data: []byte(token), Mode: 0o440, UID: 8737, GID: 0}}}
	proot, cfg := amd64(t)
	r := start(t, proot, cfg, p, sidecar)
	require.Len(t, sidecar.Ports, 1)
	url := "http://127.0.0.1:" + strconv.Itoa(r.Port(t, sidecar.Ports[0].ContainerPort))
	r.waitHTTP(t, r.Port(t, sidecar.Ports[0].ContainerPort), "/readyz")

	args, err := argotest.Args(wf.Name, ns, string(wf.UID), "key: train\n"+exampleStep(t))
	require.NoError(t, err)
	var phase wfv1.NodePhase
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		reply, err := argotest.Execute(t.Context(), url, token, args)
		require.NoError(ct, err)
		require.Equal(ct, 200, reply.Status, "body: %s", reply.Body)
		require.NotNil(ct, reply.Node, "body: %s", reply.Body)
		phase = reply.Node.Phase
		assert.Equal(ct, wfv1.NodeSucceeded, phase, reply.Node.Message)
	}, stepTimeout, testenv.Interval, "the step did not succeed (last %s); plugin log:\n%s", phase, tail(r.Log.String(), 30))
	tjs := &trainer.TrainJobList{}
	// The workflow's own: other tests install the face in the same namespace.
	require.NoError(t, c.List(t.Context(), tjs, client.InNamespace(ns), client.MatchingLabels{trainjob.LabelOwnerUID: string(wf.UID)}))
	require.Len(t, tjs.Items, 1)
	assert.Equal(t, argo.Engine, tjs.Items[0].Labels[trainjob.LabelEngine])
}
