package lifecycle

import (
	"errors"
	"fmt"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// What the model's apiserver answers while a fault lasts: the requests a look makes (never the
// world's own) fail, or take a while on the clock, for the next n of them.

// Requests and what they are about.
const (
	verbGet    = "get"
	verbCreate = "create"
	verbPatch  = "patch"
	verbUpdate = "update"
	verbDelete = "delete"

	kindTrainJob = "TrainJob"
	// kindStore is the step cache's ConfigMap; a fault on its update fails its create too.
	kindStore = "store"
)

// faultKind is how a request fails.
type faultKind int

const (
	faultConflict  faultKind = iota // 409
	faultForbidden                  // 403
	faultInvalid                    // 422: a webhook or the schema refuses the object
	faultInternal                   // 500: a webhook with no endpoint
	faultTimeout                    // 504 before anything is written
	faultLost                       // the write lands, its answer is a 504
	faultSlow                       // no error: each request takes slow on the clock
)

var faultNames = map[faultKind]string{faultConflict: "409 Conflict", faultForbidden: "403 Forbidden",
	faultInvalid: "422 Invalid", faultInternal: "500 InternalError", faultTimeout: "504 Timeout",
	faultLost: "504 after the write landed", faultSlow: "slow"}

// fault is one kind of request failing for a while.
type fault struct {
	verb, kind string // "" verb: every request about kind
	what       faultKind
	left       int
	slow       time.Duration
}

func (f fault) String() string {
	verb := f.verb
	if verb == "" {
		verb = "every request"
	}
	what := faultNames[f.what]
	if f.what == faultSlow {
		what = fmt.Sprintf("takes %s", f.slow)
	}
	return fmt.Sprintf("%s %s: %s, %d times", verb, f.kind, what, f.left)
}

// label names a fault a look met, as lookRecord.faults holds it.
func (f fault) label() string { return f.verb + " " + f.kind + " " + faultNames[f.what] }

// isCreateFault says a look's fault was on a TrainJob's create: trouble a step must carry on
// through to its deadline, not a reason to outlive it.
func isCreateFault(label string) bool {
	return strings.HasPrefix(label, verbCreate+" "+kindTrainJob+" ")
}

// isStoreFault says a look's fault was on the step cache: the step trains as if it had no cache
// block.
func isStoreFault(label string) bool { return strings.Contains(label, " "+kindStore+" ") }

// isRefusal says a look's fault refused a create for good (a retry not made).
func isRefusal(label string) bool {
	return isCreateFault(label) && (strings.HasSuffix(label, faultNames[faultForbidden]) || strings.HasSuffix(label, faultNames[faultInvalid]))
}

// inject is the answer of the faults to a request of a look: nil when none applies. after asks
// for the faults that come once the write landed (faultLost).
func (w *world) inject(verb, kind string, after bool) error {
	if w.actor < 0 {
		return nil
	}
	if kind == kindStore && verb == verbCreate {
		verb = verbUpdate // the store's first write is a create
	}
	for _, f := range w.faults {
		if f.left <= 0 || f.kind != kind || (f.verb != "" && f.verb != verb) || (f.what == faultLost) != after {
			continue
		}
		f.left--
		if f.what == faultSlow {
			w.clock.Step(f.slow)
			continue
		}
		w.lookFaults = append(w.lookFaults, fault{verb: verb, kind: kind, what: f.what}.label())
		return faultError(kind, f.what)
	}
	return nil
}

// faultError is the apiserver's answer of a kind.
func faultError(kind string, what faultKind) error {
	gr := schema.GroupResource{Group: trainer.GroupVersion.Group, Resource: "trainjobs"}
	gk := trainer.GroupVersion.WithKind("TrainJob").GroupKind()
	if kind == kindStore {
		gr, gk = corev1.Resource("configmaps"), corev1.SchemeGroupVersion.WithKind("ConfigMap").GroupKind()
	}
	switch what {
	case faultConflict:
		return apierrors.NewConflict(gr, "model", errors.New("the object has been modified"))
	case faultForbidden:
		return apierrors.NewForbidden(gr, "model", errors.New("denied by the model's policy"))
	case faultInvalid:
		return apierrors.NewInvalid(gk, "model", field.ErrorList{field.Invalid(field.NewPath("spec"), nil, "refused by the model's webhook")})
	case faultInternal:
		return apierrors.NewInternalError(errors.New("failed calling webhook: no endpoints available"))
	}
	return apierrors.NewTimeoutError("the request did not complete in time", 0)
}
