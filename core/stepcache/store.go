package stepcache

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/trainjob"
)

// The store is one ConfigMap per namespace, as Argo keeps its memoization: one data key per
// stored success (the cache key), its value the entry as JSON. kubectl reads it, `kubectl
// delete configmap trainstep-step-cache` clears the namespace's cache, and the faces' RBAC
// names it, so trainstep reads no other ConfigMap.
const (
	// ConfigMapName is the store of every namespace.
	ConfigMapName = "trainstep-step-cache"
	// AnnotationKey is the whole key, on the TrainJob a cached step creates, so the look that
	// sees it succeed stores it without planning again.
	AnnotationKey = trainjob.AnnotationCacheKey
	// LabelKey is the key's first ShortKeyLength characters on that TrainJob, to find it by.
	LabelKey = trainjob.LabelCacheKey
	// ShortKeyLength is as much of a key as a label value holds with room to spare.
	ShortKeyLength = 40
	// DefaultMaxBytes bounds the entries of a namespace, well inside the 1 MiB an object may
	// be: storing one more deletes the oldest until they fit.
	DefaultMaxBytes = 512 << 10
)

// Entry is one stored success.
type Entry struct {
	// Key is the step's cache key (Key); it is the entry's data key, not part of its value.
	Key string `json:"-"`
	// TrainJob is the job that trained it, and Outputs its step's outputs, as its face wrote them.
	TrainJob string            `json:"trainJob"`
	Outputs  map[string]string `json:"outputs"`
	// Stored is when it was stored: maxAge counts from it.
	Stored time.Time `json:"stored"`
}

// Store reads and writes entries.
type Store struct {
	// API reads the apiserver itself: no face caches ConfigMaps.
	API    client.Reader
	Writer client.Writer
	// MaxBytes bounds a namespace's entries (DefaultMaxBytes when 0).
	MaxBytes int
}

// ShortKey is the part of a key in a label.
func ShortKey(key string) string {
	if len(key) > ShortKeyLength {
		return key[:ShortKeyLength]
	}
	return key
}

// Get is the entry of key in namespace, nil when there is none.
func (s Store) Get(ctx context.Context, namespace, key string) (*Entry, error) {
	cm := &corev1.ConfigMap{}
	err := s.API.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ConfigMapName}, cm)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading the step cache %s/%s: %w", namespace, ConfigMapName, err)
	}
	raw, ok := cm.Data[key]
	if !ok {
		return nil, nil
	}
	e := &Entry{Key: key}
	if err := json.Unmarshal([]byte(raw), e); err != nil {
		return nil, fmt.Errorf("the step cache %s/%s has an entry %s that is not one (%w); remove it (kubectl edit configmap -n %s %s) or clear the cache (kubectl delete configmap -n %s %s)",
			namespace, ConfigMapName, key, err, namespace, ConfigMapName, namespace, ConfigMapName)
	}
	return e, nil
}

// Put stores e in namespace, in place of an entry of the same key, deleting the oldest entries
// while the store is over its bound; an entry its TrainJob already stored is left as it is, so
// a face that looks at a finished job again writes nothing. Two steps storing at once both land:
// a conflict is read again and retried.
func (s Store) Put(ctx context.Context, namespace string, e Entry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encoding the outputs to store: %w", err)
	}
	err = s.update(ctx, namespace, func(_ context.Context, data map[string]string) (bool, error) {
		var have Entry
		if raw, ok := data[e.Key]; ok && json.Unmarshal([]byte(raw), &have) == nil && have.TrainJob == e.TrainJob {
			return false, nil
		}
		data[e.Key] = string(b)
		for k := range data {
			if strings.HasPrefix(k, claimPrefix) && strings.HasSuffix(k, "."+e.Key) {
				delete(data, k) // trained: a step of this key is served from now on
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("storing in the step cache %s/%s: %w", namespace, ConfigMapName, err)
	}
	return nil
}

// Claim is a step's claim to train its key now, so another step of the key that starts while it
// trains follows its TrainJob instead of making a second one (docs/cache.md, "In-flight steps").
type Claim struct {
	// TrainJob is the claiming step's TrainJob, made or about to be.
	TrainJob string `json:"trainJob"`
	// Claimed is when it was claimed: a TrainJob not made within a while of it is not coming.
	Claimed time.Time `json:"claimed"`
}

// claimPrefix begins the data key of a claim, inflight.<engine>.<key>: a claim binds only the
// steps of its engine, which are the ones that can follow each other's jobs (each face watches
// its own engine's TrainJobs). It sorts as the oldest entry, so it goes first when trimmed.
const claimPrefix = "inflight."

// Claim is the claim on key among engine's steps in namespace: the one there unless stale says
// it no longer stands (its TrainJob failed or is gone), else mine, written. Of two steps
// claiming at once one write lands; the other's is a conflict, read again, and gets the winner's.
func (s Store) Claim(ctx context.Context, namespace, engine, key string, mine Claim, stale func(context.Context, Claim) (bool, error)) (Claim, error) {
	dataKey := claimPrefix + engine + "." + key
	b, err := json.Marshal(mine)
	if err != nil {
		return Claim{}, fmt.Errorf("encoding the claim: %w", err)
	}
	got := mine
	err = s.update(ctx, namespace, func(ctx context.Context, data map[string]string) (bool, error) {
		got = mine
		var have Claim
		if raw, ok := data[dataKey]; ok && json.Unmarshal([]byte(raw), &have) == nil && have.TrainJob != "" {
			if have.TrainJob == mine.TrainJob {
				got = have
				return false, nil
			}
			gone, err := stale(ctx, have)
			if err != nil || !gone {
				got = have
				return false, err
			}
		}
		data[dataKey] = string(b)
		return true, nil
	})
	if err != nil {
		return Claim{}, fmt.Errorf("claiming the key in the step cache %s/%s: %w", namespace, ConfigMapName, err)
	}
	return got, nil
}

// update changes the store of namespace: change edits its data (made when the store is not
// there yet) and says whether to write it, trimmed to the bound. Two steps writing at once both
// land: a conflict (an update, or a create another beat) is read again and changed again.
func (s Store) update(ctx context.Context, namespace string, change func(context.Context, map[string]string) (bool, error)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm := &corev1.ConfigMap{}
		err := s.API.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ConfigMapName}, cm)
		missing := apierrors.IsNotFound(err)
		switch {
		case missing:
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: ConfigMapName,
				Labels: map[string]string{trainjob.LabelManagedBy: trainjob.ManagedByValue}}}
		case err != nil:
			return err
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		write, err := change(ctx, cm.Data)
		if err != nil || !write {
			return err
		}
		s.trim(cm)
		if !missing {
			return s.Writer.Update(ctx, cm)
		}
		err = s.Writer.Create(ctx, cm)
		if apierrors.IsAlreadyExists(err) {
			return apierrors.NewConflict(corev1.Resource("configmaps"), ConfigMapName, err)
		}
		return err
	})
}

// trim deletes the oldest entries while the store is over its bound; an entry that is not one
// goes first.
func (s Store) trim(cm *corev1.ConfigMap) {
	limit := s.MaxBytes
	if limit <= 0 {
		limit = DefaultMaxBytes
	}
	size := 0
	type aged struct {
		key    string
		stored time.Time
	}
	var all []aged
	for k, v := range cm.Data {
		size += len(k) + len(v)
		var e Entry
		_ = json.Unmarshal([]byte(v), &e) // one that is not an entry has the zero time: oldest
		all = append(all, aged{k, e.Stored})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].stored.Before(all[j].stored) })
	for _, a := range all {
		if size <= limit || len(cm.Data) == 1 {
			return
		}
		size -= len(a.key) + len(cm.Data[a.key])
		delete(cm.Data, a.key)
	}
}
