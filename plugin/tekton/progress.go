package tekton

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trainstep/trainstep/core/trainjob"
)

// runningMessage is the message a running run gets: the observation's, unless it differs from
// the one written only in its progress line and that was written less than
// trainjob.ProgressEvery ago (extraFields.ProgressAt): a trainer that reports every step must not
// turn into a status write per step. The wait says when to look again for the held change.
func (s *state) runningMessage(msg string) (string, time.Duration) {
	msg = truncate(msg)
	prev := ""
	if c := s.run.Status.Succeeded(); c != nil && c.Status == corev1.ConditionUnknown {
		prev = c.Message
	}
	var at time.Time
	if s.extra.ProgressAt != nil {
		at = s.extra.ProgressAt.Time
	}
	out, wait := trainjob.ThrottleProgress(prev, at, msg, s.now, trainjob.ProgressEvery)
	if out != prev {
		now := metav1.NewTime(s.now)
		s.extra.ProgressAt = &now
	}
	return out, wait
}

// sooner makes res come back within wait, when there is one.
func sooner(res reconcile.Result, wait time.Duration) reconcile.Result {
	if wait > 0 && (res.RequeueAfter == 0 || wait < res.RequeueAfter) {
		res.RequeueAfter = wait + 10*time.Millisecond
	}
	return res
}
