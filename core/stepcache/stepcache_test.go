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
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

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
	s, err := step.Parse([]byte(doc))
	require.NoError(t, err)
	require.NoError(t, step.Invalid(s.Validate()))
	p, err := (&trainjob.Planner{Trainers: trainers.Builtin(), Runtimes: stock.Source{}}).Plan(context.Background(), s, "team")
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

	s, err := step.Parse([]byte(base))
	require.NoError(t, err)
	p, err := (&trainjob.Planner{Trainers: trainers.Builtin(), Runtimes: stock.Source{}}).Plan(t.Context(), s, "team")
	require.NoError(t, err)
	p.Runtime.Image += "-next"
	other, err := Key(p, "")
	require.NoError(t, err)
	assert.NotEqual(t, k, other, "the runtime's image")
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
