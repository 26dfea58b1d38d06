package trainjob

import (
	"context"
	"fmt"
	"strings"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Kueue queues a TrainJob labelled LabelKueueQueue: its mutating webhook creates it suspended
// (spec.suspend), Kueue makes a Workload owned by it, reserves quota for the Workload in a
// ClusterQueue and resumes the TrainJob (admission); to preempt or evict it, Kueue suspends it
// again (the Trainer deletes its pods) and requeues the Workload. The Trainer mirrors each
// change in its Suspended condition, so the TrainJob alone says when it was last resumed;
// why it waits, and how often it was evicted, only the Workload says, in Kueue's words.
// Kueue's API is read as unstructured objects: trainstep does not depend on Kueue's module.

// WorkloadGVK is the Kueue Workload version trainstep reads (served by Kueue v0.15+, the storage
// version of v0.17).
var WorkloadGVK = schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "Workload"}

// LabelKueueJobUID is the label Kueue puts on a Workload: the UID of the job it stands for.
const LabelKueueJobUID = "kueue.x-k8s.io/job-uid"

// Kueue's Workload condition types and eviction reasons (kueue.x-k8s.io/v1beta2).
const (
	kueueQuotaReserved = "QuotaReserved"
	kueueAdmitted      = "Admitted"
	kueueEvicted       = "Evicted"
	kueuePreempted     = "Preempted"
	kueueRequeued      = "Requeued"
	// KueueEvictedByPreemption is the eviction reason of a preempted Workload.
	KueueEvictedByPreemption = "Preempted"
)

// Workload is what Kueue says of the TrainJob it queues: plain values from its Workload.
type Workload struct {
	Name         string
	ClusterQueue string
	// Cluster is the MultiKueue worker cluster the Workload was dispatched to (status.clusterName).
	Cluster string
	// Admitted is Admitted=True: quota reserved and every admission check passed; AdmittedAt is
	// when it last became so (on a MultiKueue manager: when the job was dispatched to a worker).
	Admitted   bool
	AdmittedAt time.Time
	// Inactive is spec.active false: Kueue deactivated the Workload (its requeuing limit, a
	// rejected admission check, its maximum execution time) or a person did, and it is never
	// admitted again until someone sets it active. EvictedReason says which
	// (Deactivated, DeactivatedDueTo<cause>).
	Inactive bool
	// Waiting is why it is not admitted, in Kueue's words: the QuotaReserved=False message
	// ("couldn't assign flavors to pod set node: insufficient quota ..."), else the
	// Admitted=False one (admission checks pending).
	Waiting string
	// Evicted is the Evicted=True condition's reason and message: the last eviction, until the
	// Workload is admitted again.
	EvictedReason, EvictedMessage string
	// PreemptedReason is the Preempted=True condition's reason (InClusterQueue, InCohort...).
	PreemptedReason string
	// Requeued says Kueue put the evicted Workload back in its queue.
	Requeued bool
	// Preemptions and Evictions count Kueue's evictions of the Workload (schedulingStats):
	// by preemption, and of any reason (preemption, waitForPodsReady, a stopped queue...).
	Preemptions, Evictions int
}

// NewWorkloadList is an empty list of Workloads, to list or watch them.
func NewWorkloadList() *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(WorkloadGVK.GroupVersion().WithKind(WorkloadGVK.Kind + "List"))
	return l
}

// Queued reports whether Kueue queues the TrainJob (it carries LabelKueueQueue): only then is
// there a Workload to read.
func Queued(tj *trainer.TrainJob) bool { return tj.Labels[LabelKueueQueue] != "" }

// WorkloadOf finds the TrainJob's Workload among workloads (by its owner reference to the
// TrainJob's UID) and reads it; nil when there is none (Kueue has not made it yet, or the
// caller may not read Workloads).
func WorkloadOf(tj *trainer.TrainJob, workloads []unstructured.Unstructured) *Workload {
	for i := range workloads {
		u := &workloads[i]
		for _, ref := range u.GetOwnerReferences() {
			if ref.UID == tj.UID && ref.Kind == "TrainJob" {
				return ReadWorkload(u)
			}
		}
	}
	return nil
}

// ReadWorkload reads the fields of a Workload trainstep reports.
func ReadWorkload(u *unstructured.Unstructured) *Workload {
	w := &Workload{Name: u.GetName()}
	w.ClusterQueue, _, _ = unstructured.NestedString(u.Object, "status", "admission", "clusterQueue")
	w.Cluster, _, _ = unstructured.NestedString(u.Object, "status", "clusterName")
	conds := workloadConditions(u)
	if c := apimeta.FindStatusCondition(conds, kueueAdmitted); c != nil {
		w.Admitted = c.Status == metav1.ConditionTrue
		if w.Admitted {
			w.AdmittedAt = c.LastTransitionTime.Time
		} else {
			w.Waiting = c.Message
		}
	}
	if active, found, _ := unstructured.NestedBool(u.Object, "spec", "active"); found && !active {
		w.Inactive = true
	}
	if c := apimeta.FindStatusCondition(conds, kueueQuotaReserved); c != nil && c.Status != metav1.ConditionTrue && c.Message != "" {
		w.Waiting = c.Message
	}
	if c := apimeta.FindStatusCondition(conds, kueueEvicted); c != nil && c.Status == metav1.ConditionTrue {
		w.EvictedReason, w.EvictedMessage = c.Reason, c.Message
	}
	if c := apimeta.FindStatusCondition(conds, kueuePreempted); c != nil && c.Status == metav1.ConditionTrue {
		w.PreemptedReason = c.Reason
	}
	w.Requeued = apimeta.IsStatusConditionTrue(conds, kueueRequeued)
	evictions, _, _ := unstructured.NestedSlice(u.Object, "status", "schedulingStats", "evictions")
	for _, e := range evictions {
		m, _ := e.(map[string]any)
		n, _ := m["count"].(int64)
		w.Evictions += int(n)
		if m["reason"] == KueueEvictedByPreemption {
			w.Preemptions += int(n)
		}
	}
	return w
}

func workloadConditions(u *unstructured.Unstructured) []metav1.Condition {
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	out := make([]metav1.Condition, 0, len(raw))
	for _, r := range raw {
		m, _ := r.(map[string]any)
		c := metav1.Condition{}
		c.Type, _ = m["type"].(string)
		s, _ := m["status"].(string)
		c.Status = metav1.ConditionStatus(s)
		c.Reason, _ = m["reason"].(string)
		c.Message, _ = m["message"].(string)
		if ts, _ := m["lastTransitionTime"].(string); ts != "" {
			if t, err := time.Parse(time.RFC3339, ts); err == nil {
				c.LastTransitionTime = metav1.NewTime(t)
			}
		}
		out = append(out, c)
	}
	return out
}

// LastResumed is when the TrainJob was last resumed (admitted by Kueue, or spec.suspend
// cleared): the Trainer's Suspended=False condition's transition; zero when it was never
// suspended.
func LastResumed(tj *trainer.TrainJob) time.Time {
	c := apimeta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobSuspended)
	if c == nil || c.Status != metav1.ConditionFalse {
		return time.Time{}
	}
	return c.LastTransitionTime.Time
}

// startFrom is when startTimeout starts counting: since, or the job's last admission when later
// (the Trainer's last resume, or Kueue's Admitted=True on its Workload). A job Kueue held in its
// queue for longer than startTimeout has not been failing to start meanwhile. False when it
// cannot start counting yet: a MultiKueue job whose dispatch to a worker nothing shows (the
// manager's Trainer leaves it alone, so no resume is recorded until the worker's status is
// mirrored, and its Workload is not read): counting from its creation would delete a job that
// waited in the manager's queue the moment it is dispatched.
func startFrom(tj *trainer.TrainJob, since time.Time, w *Workload) (time.Time, bool) {
	from, admitted := since, false
	if r := LastResumed(tj); !r.IsZero() {
		admitted = true
		if r.After(from) {
			from = r
		}
	}
	if w != nil && w.Admitted && !w.AdmittedAt.IsZero() {
		admitted = true
		if w.AdmittedAt.After(from) {
			from = w.AdmittedAt
		}
	}
	if Remote(tj) && !admitted {
		return time.Time{}, false
	}
	return from, true
}

// WithWorkload adds what Kueue says to a TrainJob's observation: the counts, the queue wait and,
// while it is suspended, why, in Kueue's words.
func (o Observation) WithWorkload(tj *trainer.TrainJob, w *Workload) Observation {
	if r := LastResumed(tj); !r.IsZero() && !tj.CreationTimestamp.IsZero() {
		wait := r.Sub(tj.CreationTimestamp.Time)
		o.QueueWait = &wait
	}
	if Remote(tj) {
		cluster := ""
		if w != nil {
			cluster = w.Cluster
		}
		o = o.remote(tj, cluster)
	}
	if w == nil {
		return o
	}
	if o.QueueWait == nil && !w.AdmittedAt.IsZero() && !tj.CreationTimestamp.IsZero() {
		// A MultiKueue job is never resumed on the manager (its Trainer leaves it alone): it
		// left the queue when Kueue admitted its Workload.
		wait := w.AdmittedAt.Sub(tj.CreationTimestamp.Time)
		o.QueueWait = &wait
	}
	o.Preemptions, o.Evictions, o.ClusterQueue = w.Preemptions, w.Evictions, w.ClusterQueue
	if o.Phase != PhaseSuspended {
		return o
	}
	if o.Remote && w.Admitted && w.Cluster != "" {
		// Admitted here and dispatched: the suspension mirrored is the worker's queue's.
		o.Reason = "Dispatched"
		o.Message = fmt.Sprintf("TrainJob %s is dispatched to cluster %s (MultiKueue) and waits there for its queue to admit it", tj.Name, w.Cluster)
		return o
	}
	o.Message = w.describe(tj)
	if w.EvictedReason != "" {
		o.Reason = "Evicted" + w.EvictedReason
		if w.EvictedReason == KueueEvictedByPreemption {
			o.Reason = "Preempted"
		}
	} else {
		o.Reason = "Queued"
	}
	return o
}

// evictedByKueue reports whether obs is a job Kueue preempted or evicted (WithWorkload's
// reasons): news a face passes on at once, since a requeued job may be admitted again at once.
func evictedByKueue(obs Observation) bool {
	return obs.Phase == PhaseSuspended && (obs.Reason == "Preempted" || strings.HasPrefix(obs.Reason, "Evicted"))
}

// describe says where a suspended TrainJob is and why, in Kueue's words.
func (w *Workload) describe(tj *trainer.TrainJob) string {
	queue := tj.Labels[LabelKueueQueue]
	var b strings.Builder
	switch {
	case w.EvictedReason == KueueEvictedByPreemption:
		fmt.Fprintf(&b, "TrainJob %s was preempted by Kueue", tj.Name)
		if w.PreemptedReason != "" {
			fmt.Fprintf(&b, " (%s)", w.PreemptedReason)
		}
		fmt.Fprintf(&b, ": %s", w.EvictedMessage)
	case w.EvictedReason != "":
		fmt.Fprintf(&b, "TrainJob %s was evicted by Kueue (%s): %s", tj.Name, w.EvictedReason, w.EvictedMessage)
	case w.Admitted:
		fmt.Fprintf(&b, "TrainJob %s is admitted by Kueue to ClusterQueue %s (Workload %s): resuming", tj.Name, w.ClusterQueue, w.Name)
	default:
		fmt.Fprintf(&b, "TrainJob %s is queued in LocalQueue %s (Workload %s)", tj.Name, queue, w.Name)
	}
	if w.EvictedReason != "" {
		if w.Requeued {
			fmt.Fprintf(&b, "; requeued in LocalQueue %s", queue)
		} else {
			b.WriteString("; not yet requeued")
		}
	}
	if w.Waiting != "" && w.Waiting != w.EvictedMessage {
		fmt.Fprintf(&b, "; waiting: %s", w.Waiting)
	}
	return b.String()
}

// WorkloadMatters says whether a TrainJob's Workload can change what its step decides or says,
// so a face starts reading (and caching) Workloads only then (once it caches them, it reads them
// for every queued job: a finished step reports Kueue's counts): a queued job not yet recorded started, or
// suspended again (preempted, deactivated), and a MultiKueue job, whose Workload alone tells
// when it was admitted and on which worker it runs. A started local job's Workload says nothing
// its pods do not.
func WorkloadMatters(tj *trainer.TrainJob) bool {
	if !Queued(tj) {
		return false
	}
	return Remote(tj) || StartedAt(tj).IsZero() || ptr.Deref(tj.Spec.Suspend, false)
}

// FindWorkload reads the Workload of a queued TrainJob from r (a LIST by Kueue's job-uid label:
// from a face's cache, or one request to the apiserver). Nil, nil when the TrainJob is not
// queued or Kueue has not made one yet. An error (no Kueue CRDs, no right to read Workloads) is
// for the face to log: the step then follows the TrainJob alone.
func FindWorkload(ctx context.Context, r client.Reader, tj *trainer.TrainJob) (*Workload, error) {
	if !Queued(tj) || tj.UID == "" {
		return nil, nil
	}
	l := NewWorkloadList()
	if err := r.List(ctx, l, client.InNamespace(tj.Namespace), client.MatchingLabels{LabelKueueJobUID: string(tj.UID)}); err != nil {
		return nil, fmt.Errorf("reading Kueue's Workload of TrainJob %s/%s (needs get and list on workloads.kueue.x-k8s.io): %w", tj.Namespace, tj.Name, err)
	}
	return WorkloadOf(tj, l.Items), nil
}

// kueueDeactivated is the Evicted reason of a deactivated Workload: alone when a person set
// spec.active false, DeactivatedDueTo<cause> when Kueue did (RequeuingLimitExceeded,
// MaximumExecutionTimeExceeded, a rejected admission check).
const kueueDeactivated = "Deactivated"

// deactivated ends a step whose Workload is deactivated: Kueue keeps such a job suspended until
// someone sets the Workload active again, and nothing in a pipeline will, so the step would wait
// forever (Suspended is exempt from startTimeout, and Argo and Tekton set no timeout by
// default). The TrainJob is deleted, as at startTimeout: a step that has ended leaves nothing
// that could start training later with no one following it.
func deactivated(v Verdict, now time.Time, w *Workload) Verdict {
	reason := w.EvictedReason
	if !strings.HasPrefix(reason, kueueDeactivated) {
		reason = kueueDeactivated // set inactive, not yet evicted by Kueue
	}
	who := "Kueue deactivated"
	if reason == kueueDeactivated {
		who = "someone deactivated (spec.active: false)"
	}
	msg := fmt.Sprintf("TrainJob %s will not run: %s its Workload %s (%s)", v.Name, who, w.Name, reason)
	if w.EvictedMessage != "" {
		msg += ": " + w.EvictedMessage
	}
	v.Phase, v.Reason = PhaseFailed, reason
	v.Message = msg + "; Kueue admits a deactivated Workload again only when someone sets it active, so the step ends here; its TrainJob was deleted"
	v.CompletionTime = &now
	v.Delete, v.Trouble, v.NoTail = true, false, true
	return v
}
