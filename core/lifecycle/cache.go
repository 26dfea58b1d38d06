package lifecycle

import (
	"context"
	"fmt"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainstep/trainstep/core/stepcache"
	"github.com/trainstep/trainstep/core/trainjob"
)

// The step cache in the life of a step (docs/cache.md): before a step with a cache block
// creates its TrainJob it looks for a stored success of its key, and is served from it when
// one is young enough; the TrainJob it creates instead carries its key, and the look that sees
// that job succeed stores its outputs. A cache the face may not read or write is a warning,
// never a failed step: the step trains as if it had no cache block.

func (e *Engine) cache() stepcache.Store {
	return stepcache.Store{API: e.API, Writer: e.Writer}
}

// cacheKey is the step's cache key, "" for a step without a cache block.
func cacheKey(s Step, plan *trainjob.Plan) (string, error) {
	if s.Spec.Cache == nil {
		return "", nil
	}
	return stepcache.Key(plan, s.Spec.Cache.Salt)
}

// served is the step served from its key's stored success, when there is one younger than its
// maxAge and the step does not ask to refresh it.
func (e *Engine) served(ctx context.Context, s Step, key string) (Status, bool) {
	if key == "" || s.Spec.Cache.Refresh {
		return Status{}, false
	}
	entry, err := e.cache().Get(ctx, s.Namespace, key)
	if err != nil {
		e.warn(ctx, "the step cache could not be read, so the step trains", err)
		return Status{}, false
	}
	if entry == nil {
		return Status{}, false
	}
	age := e.now().Sub(entry.Stored)
	if age > s.Spec.Cache.MaxAge.Duration {
		return Status{}, false
	}
	stored := trainjob.Observation{}
	msg := fmt.Sprintf("served from the step cache: TrainJob %s trained it %s ago (cache.maxAge %s); %s",
		entry.TrainJob, age.Round(time.Second), s.Spec.Cache.MaxAge.Duration, entry.Outputs[trainjob.OutMessage])
	stored.Namespace, stored.Phase, stored.Reason, stored.Message = s.Namespace, trainjob.PhaseSucceeded, ReasonCacheHit, msg
	stored.CacheKey, stored.Cached = key, &trainjob.Cached{From: entry.TrainJob, Outputs: entry.Outputs}
	return Status{Observation: stored}, true
}

// ReasonCacheHit: the step was served from the step cache and trained nothing.
const ReasonCacheHit = "CacheHit"

// markCached gives the TrainJob a cached step creates its key, and the step's hold on it: a step
// of the same key that starts while it trains may follow it (share.go), and the job then goes
// with the last of the steps that hold it.
func markCached(obj client.Object, key string, id trainjob.Identity) {
	if key == "" {
		return
	}
	labels, annotations := obj.GetLabels(), obj.GetAnnotations()
	if labels == nil {
		labels = map[string]string{}
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	labels[stepcache.LabelKey] = stepcache.ShortKey(key)
	hk, hv := id.HoldLabel()
	labels[hk] = hv
	annotations[stepcache.AnnotationKey] = key
	obj.SetLabels(labels)
	obj.SetAnnotations(annotations)
}

// store keeps the outputs of a cached step whose TrainJob succeeded (as the face writes them,
// but for the cache outputs), once: a later look finds them stored for this job and writes
// nothing. Every look at a cached step's job gives the step its key. A step that follows
// another's job stores it too: its maker may have let go of it before it ended.
func (e *Engine) store(ctx context.Context, s Step, tj *trainer.TrainJob, st Status) Status {
	if tj == nil || s.Spec == nil || s.Spec.Cache == nil || tj.Annotations[stepcache.AnnotationKey] == "" ||
		st.Name != tj.Name || st.Err != nil {
		return st
	}
	key := tj.Annotations[stepcache.AnnotationKey]
	if st.Phase == trainjob.PhaseSucceeded {
		entry := stepcache.Entry{Key: key, TrainJob: tj.Name, Outputs: st.Outputs(), Stored: e.now()}
		if err := e.cache().Put(ctx, s.Namespace, entry); err != nil {
			e.warn(ctx, "the step's outputs could not be stored in the step cache", err)
		}
	}
	st.CacheKey = key
	if !s.Identity.Adopts(tj) {
		// A job another step of the key made, which this one follows (share.go): a hit, its
		// outputs the job's own, and every message while it runs says whose job it is.
		st.Cached = &trainjob.Cached{From: tj.Name}
		if !st.Phase.Terminal() && !st.Stopped && st.Reason != ReasonFollowing {
			st.Message = followingNote(tj.Name) + "; " + st.Message
		}
	}
	return st
}

// warn tells the face of trouble the step carries on past.
func (e *Engine) warn(ctx context.Context, msg string, err error) {
	if e.Warn != nil {
		e.Warn(ctx, msg, err)
	}
}
