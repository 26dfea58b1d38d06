package stepcache

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/runtimes/stock"
	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/core/trainers"
	"github.com/trainstep/trainstep/core/trainjob"
)

const base = `framework: torch
trainer:
  numNodes: 2
  env: {LR: "0.1"}
  func: |
    def train(epochs):
        return {"loss": 0.1 * epochs}
  funcArgs: {epochs: 3}
timeout: 1h
cache: {maxAge: 24h}
`

func keyOf(t *testing.T, doc string) string {
	t.Helper()
	return keyOn(t, doc, stock.Source{}, trainjob.AssumedAPI)
}

// keyOn is the key of the step doc planned against the runtimes of src on a Trainer that takes api.
func keyOn(t *testing.T, doc string, src runtimes.Source, api trainjob.API) string {
	t.Helper()
	s, err := step.Parse([]byte(doc))
	require.NoError(t, err)
	require.NoError(t, step.Invalid(s.Validate()))
	p, err := (&trainjob.Planner{Trainers: trainers.Builtin(), Runtimes: src, API: &api}).Plan(context.Background(), s, "team")
	require.NoError(t, err)
	salt := ""
	if s.Cache != nil {
		salt = s.Cache.Salt
	}
	k, err := Key(p, salt)
	require.NoError(t, err)
	return k
}

// What decides the training changes the key; what only names or bounds the job does not.
func TestKey(t *testing.T) {
	k := keyOf(t, base)
	assert.Regexp(t, `^[0-9a-f]{64}$`, k)
	assert.Equal(t, k, keyOf(t, base), "the same step, the same key")
	same := map[string]string{
		"another timeout": replace(t, base, "timeout: 1h", "timeout: 3h"),
		"another maxAge":  replace(t, base, "cache: {maxAge: 24h}", "cache: {maxAge: 1h}"),
		"refresh":         replace(t, base, "cache: {maxAge: 24h}", "cache: {maxAge: 24h, refresh: true}"),
		"a name prefix":   base + "namePrefix: nightly\n",
		"labels":          base + "labels: {team: vision}\n",
		"annotations":     base + "annotations: {owner: ana}\n",
		"a start timeout": base + "startTimeout: 10m\n",
	}
	for name, doc := range same {
		assert.Equal(t, k, keyOf(t, doc), name)
	}
	differ := map[string]string{
		"one byte of the function": replace(t, base, "0.1 * epochs", "0.2 * epochs"),
		"an argument":              replace(t, base, "epochs: 3", "epochs: 4"),
		"an env value":             replace(t, base, `LR: "0.1"`, `LR: "0.2"`),
		"the node count":           replace(t, base, "numNodes: 2", "numNodes: 3"),
		"a salt":                   replace(t, base, "cache: {maxAge: 24h}", "cache: {maxAge: 24h, salt: dataset-v2}"),
	}
	for name, doc := range differ {
		assert.NotEqual(t, k, keyOf(t, doc), name)
	}
}

// podStep mounts a dataset's volume and names what its pods run as and where.
const podStep = base + `pod:
  nodeSelector: {pool: gpu}
  serviceAccountName: trainer
  volumes: [{name: data, persistentVolumeClaim: {claimName: datasets}}]
  volumeMounts: [{name: data, mountPath: /data}]
  envFrom: [{secretRef: {name: s3}, prefix: AWS_}]
`

// The pod block decides what a step trains on (the dataset's volume, the Secret it reads) on
// every Trainer: on v2.1 it reaches the pods through spec.podTemplateOverrides, which only the
// submitted object carries, and the key is the submitted object's.
func TestKeyCoversThePodBlockOnEveryTrainer(t *testing.T) {
	for _, api := range []trainjob.API{
		{PodMechanism: trainjob.PodTemplateOverrides, MaxCommandItem: trainjob.CommandItemV22, Source: "test v2.1"},
		{PodMechanism: trainjob.PodRuntimePatches, ActiveDeadline: true, MaxCommandItem: trainjob.CommandItemV22, Source: "test v2.2"},
		trainjob.AssumedAPI,
	} {
		t.Run(api.Source, func(t *testing.T) {
			k := keyOn(t, podStep, stock.Source{}, api)
			assert.Equal(t, k, keyOn(t, replace(t, podStep, "timeout: 1h", "timeout: 3h"), stock.Source{}, api), "the timeout (activeDeadlineSeconds) is left out")
			for name, doc := range map[string]string{
				"the dataset's PVC":      replace(t, podStep, "claimName: datasets", "claimName: datasets-v2"),
				"the nodeSelector":       replace(t, podStep, "pool: gpu", "pool: a100"),
				"the serviceAccountName": replace(t, podStep, "serviceAccountName: trainer", "serviceAccountName: trainer-eu"),
				"the envFrom Secret":     replace(t, podStep, "secretRef: {name: s3}", "secretRef: {name: s3-eu}"),
			} {
				assert.NotEqual(t, k, keyOn(t, doc, stock.Source{}, api), name)
			}
		})
	}
}

// dataRuntime is a runtime with a dataset initializer, a world size and a pod template beyond the
// part of it trainstep reads.
const dataRuntime = `apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  name: torch-data
  labels: {trainer.kubeflow.org/framework: torch}
spec:
  mlPolicy: {numNodes: 1, torch: {numProcPerNode: 2}}
  template:
    spec:
      replicatedJobs:
        - name: dataset-initializer
          template:
            metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer}}
            spec: {template: {spec: {containers: [{name: dataset-initializer, image: ghcr.io/kubeflow/trainer/dataset-initializer:v2.3.0}]}}}
        - name: node
          template:
            metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}
            spec: {template: {spec: {volumes: [{name: shm, emptyDir: {medium: Memory}}], containers: [{name: node, image: pytorch/pytorch:2.13.0}]}}}
`

// runtimeSource serves one runtime, decoded from YAML.
type runtimeSource string

func (s runtimeSource) List(context.Context, string) (runtimes.Catalog, error) {
	u := unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(s), &u.Object); err != nil {
		return runtimes.Catalog{}, err
	}
	return runtimes.NewCatalog([]unstructured.Unstructured{u}), nil
}

// The whole runtime decides what a step trains, not only the part trainstep reads: an admin who
// changes its world size, an initializer's image or its pod template gets a miss. What only
// names or describes the object does not change the key.
func TestKeyCoversTheWholeRuntime(t *testing.T) {
	k := keyOn(t, base, runtimeSource(dataRuntime), trainjob.AssumedAPI)
	assert.Equal(t, k, keyOn(t, base, runtimeSource(dataRuntime), trainjob.AssumedAPI), "the same runtime, the same key")
	same := map[string]string{
		"an annotation":     replace(t, dataRuntime, "  name: torch-data\n", "  name: torch-data\n  annotations: {owner: platform}\n"),
		"a resourceVersion": replace(t, dataRuntime, "  name: torch-data\n", "  name: torch-data\n  resourceVersion: \"42\"\n"),
	}
	for name, doc := range same {
		assert.Equal(t, k, keyOn(t, base, runtimeSource(doc), trainjob.AssumedAPI), name)
	}
	differ := map[string]string{
		"numProcPerNode":           replace(t, dataRuntime, "numProcPerNode: 2", "numProcPerNode: 4"),
		"the initializer's image":  replace(t, dataRuntime, "dataset-initializer:v2.3.0", "dataset-initializer:v2.4.0"),
		"the initializer's env":    replace(t, dataRuntime, "dataset-initializer:v2.3.0}", "dataset-initializer:v2.3.0, env: [{name: HF_HUB_OFFLINE, value: \"1\"}]}"),
		"a toleration":             replace(t, dataRuntime, "spec: {template: {spec: {volumes:", "spec: {template: {spec: {tolerations: [{key: gpu, operator: Exists}], volumes:"),
		"a volume":                 replace(t, dataRuntime, "medium: Memory", "medium: \"\""),
		"a sidecar":                replace(t, dataRuntime, "containers: [{name: node,", "initContainers: [{name: proxy, image: envoy, restartPolicy: Always}], containers: [{name: node,"),
		"the node container image": replace(t, dataRuntime, "pytorch/pytorch:2.13.0", "pytorch/pytorch:2.14.0"),
		"the runtime's name":       strings.ReplaceAll(dataRuntime, "torch-data", "torch-data-v2"),
	}
	for name, doc := range differ {
		assert.NotEqual(t, k, keyOn(t, base, runtimeSource(doc), trainjob.AssumedAPI), name)
	}
}

func replace(t *testing.T, s, old, repl string) string {
	t.Helper()
	require.Contains(t, s, old)
	return strings.Replace(s, old, repl, 1)
}

func store(t *testing.T, maxBytes int, objs ...client.Object) (Store, client.Client) {
	c := fake.NewClientBuilder().WithObjects(objs...).Build()
	return Store{API: c, Writer: c, MaxBytes: maxBytes}, c
}

// An entry is stored whole, found by its key in its namespace only, replaced in place, and the
// oldest go when the store is over its bound.
func TestStore(t *testing.T) {
	ctx := t.Context()
	s, c := store(t, 0)
	t0 := time.Date(2026, 12, 4, 8, 0, 0, 0, time.UTC)
	key := func(i int) string { return fmt.Sprintf("%064x", i) }
	got, err := s.Get(ctx, "team", key(1))
	require.NoError(t, err)
	assert.Nil(t, got, "nothing stored yet")

	out := map[string]string{"trainjob-name": "train-1", "result": `{"loss":0.3}`, "message": "TrainJob train-1 completed"}
	require.NoError(t, s.Put(ctx, "team", Entry{Key: key(1), TrainJob: "train-1", Outputs: out, Stored: t0}))
	got, err = s.Get(ctx, "team", key(1))
	require.NoError(t, err)
	require.NotNil(t, got)
	assert.Equal(t, Entry{Key: key(1), TrainJob: "train-1", Outputs: out, Stored: t0}, *got)

	none, err := s.Get(ctx, "other", key(1))
	require.NoError(t, err)
	assert.Nil(t, none, "namespaced")
	none, err = s.Get(ctx, "team", key(2))
	require.NoError(t, err)
	assert.Nil(t, none, "another key")

	require.NoError(t, s.Put(ctx, "team", Entry{Key: key(1), TrainJob: "train-2", Outputs: out, Stored: t0.Add(time.Hour)}))
	got, err = s.Get(ctx, "team", key(1))
	require.NoError(t, err)
	assert.Equal(t, "train-2", got.TrainJob, "refreshed in place")

	require.NoError(t, s.Put(ctx, "team", Entry{Key: key(1), TrainJob: "train-2", Outputs: map[string]string{}, Stored: t0.Add(2 * time.Hour)}))
	again, err := s.Get(ctx, "team", key(1))
	require.NoError(t, err)
	assert.Equal(t, got, again, "the same TrainJob stored again: left as it was")

	cm := &corev1.ConfigMap{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "team", Name: ConfigMapName}, cm))
	assert.Len(t, cm.Data, 1)
	assert.Equal(t, "trainstep", cm.Labels["app.kubernetes.io/managed-by"])

	// No bound set is DefaultMaxBytes, not none: a second entry leaves the first.
	require.NoError(t, s.Put(ctx, "team", Entry{Key: key(2), TrainJob: "train-3", Outputs: out, Stored: t0.Add(3 * time.Hour)}))
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "team", Name: ConfigMapName}, cm))
	assert.Len(t, cm.Data, 2)
}

// Storing past the bound deletes the oldest entries, never the one just stored.
func TestStoreKeepsToItsBound(t *testing.T) {
	ctx := t.Context()
	t0 := time.Date(2026, 12, 4, 8, 0, 0, 0, time.UTC)
	one, err := json.Marshal(Entry{TrainJob: "j", Stored: t0})
	require.NoError(t, err)
	s, c := store(t, 3*(64+len(one))) // room for three
	for i := range 5 {
		require.NoError(t, s.Put(ctx, "team", Entry{Key: fmt.Sprintf("%064x", i), TrainJob: "j", Stored: t0.Add(time.Duration(i) * time.Minute)}))
	}
	cm := &corev1.ConfigMap{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "team", Name: ConfigMapName}, cm))
	var keys []string
	for k := range cm.Data {
		keys = append(keys, k)
	}
	assert.ElementsMatch(t, []string{fmt.Sprintf("%064x", 2), fmt.Sprintf("%064x", 3), fmt.Sprintf("%064x", 4)}, keys)
}

// An entry someone edited into nonsense is an error that names it and how to remove it.
func TestABrokenEntryNamesItself(t *testing.T) {
	key := fmt.Sprintf("%064x", 7)
	cm := &corev1.ConfigMap{}
	cm.Namespace, cm.Name = "team", ConfigMapName
	cm.Data = map[string]string{key: "yesterday"}
	s, _ := store(t, 0, cm)
	_, err := s.Get(t.Context(), "team", key)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "kubectl delete configmap -n team "+ConfigMapName)
}

// The first claim on a key stands until stale says it does not; a claim raced by another
// (the other's write lands between this one's read and write) gets the other's; storing the
// key's success ends its claims.
func TestClaim(t *testing.T) {
	ctx := t.Context()
	t0 := time.Date(2026, 12, 4, 8, 0, 0, 0, time.UTC)
	key := fmt.Sprintf("%064x", 9)
	standing := func(context.Context, Claim) (bool, error) { return false, nil }
	gone := func(context.Context, Claim) (bool, error) { return true, nil }
	a, b := Claim{TrainJob: "train-a", Claimed: t0}, Claim{TrainJob: "train-b", Claimed: t0.Add(time.Second)}

	t.Run("first claim stands", func(t *testing.T) {
		s, _ := store(t, 0)
		got, err := s.Claim(ctx, "team", "argo", key, a, standing)
		require.NoError(t, err)
		assert.Equal(t, a, got, "the first claim is its own")
		got, err = s.Claim(ctx, "team", "argo", key, b, standing)
		require.NoError(t, err)
		assert.Equal(t, a, got, "the second gets the first")
		got, err = s.Claim(ctx, "team", "tekton", key, b, standing)
		require.NoError(t, err)
		assert.Equal(t, b, got, "another engine's steps claim apart")
		got, err = s.Claim(ctx, "team", "argo", key, b, gone)
		require.NoError(t, err)
		assert.Equal(t, b, got, "a stale claim is taken over")
	})
	t.Run("raced: the claim that landed first wins", func(t *testing.T) {
		inner, c := store(t, 0)
		raced := false
		racing := interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if !raced {
					raced = true
					_, err := inner.Claim(ctx, "team", "argo", key, a, standing) // lands first
					require.NoError(t, err)
				}
				return c.Create(ctx, obj, opts...)
			},
		})
		s := Store{API: racing, Writer: racing}
		got, err := s.Claim(ctx, "team", "argo", key, b, standing)
		require.NoError(t, err)
		assert.True(t, raced)
		assert.Equal(t, a, got)
	})
	t.Run("stored success ends the claim", func(t *testing.T) {
		s, c := store(t, 0)
		_, err := s.Claim(ctx, "team", "argo", key, a, standing)
		require.NoError(t, err)
		require.NoError(t, s.Put(ctx, "team", Entry{Key: key, TrainJob: "train-a", Stored: t0}))
		cm := &corev1.ConfigMap{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "team", Name: ConfigMapName}, cm))
		assert.Equal(t, []string{key}, slices.Collect(maps.Keys(cm.Data)))
		got, err := s.Claim(ctx, "team", "argo", key, b, standing)
		require.NoError(t, err)
		assert.Equal(t, b, got, "a step of a stored key that claims it (a refresh) trains")
	})
}
