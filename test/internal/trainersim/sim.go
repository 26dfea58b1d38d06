// Package trainersim is a test-only Kubeflow Trainer: it watches TrainJobs on the test apiserver,
// creates the JobSet-labelled node pods, moves their phases and writes the TrainJob conditions the
// way the real controller does (Suspended/Resumed, Complete from AllJobsCompleted, Failed from
// FailedJobs). What each job does is decided per job: succeed, fail, hold until the test says, or
// run the trainer command for real on this machine through the local backend.
package trainersim

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trainstep/trainstep/core/local"
	"github.com/trainstep/trainstep/core/runtimes"
	"github.com/trainstep/trainstep/core/trainjob"
)

// Mode is what a simulated TrainJob does once its pods run.
type Mode string

// Modes.
const (
	// RunLocally runs the trainer command with the local backend; its exit decides the outcome and
	// its output becomes the pods' logs.
	RunLocally Mode = "RunLocally"
	Succeed    Mode = "Succeed"
	Fail       Mode = "Fail"
	// Hold leaves the job running until Finish is called.
	Hold Mode = "Hold"
	// NoResources creates no pods, as when the Trainer cannot create the JobSet (it then only
	// emits an Event).
	NoResources Mode = "NoResources"
)

// Behavior is the fate of one TrainJob.
type Behavior struct {
	Mode Mode
	// FailNode is the node whose pod fails (Fail mode).
	FailNode int
	// Log lines each node "prints" in Succeed/Fail modes.
	Log      []string
	Progress *int32
	Metrics  map[string]string
	// Result is the return value (JSON) node 0's container leaves in its termination message, as
	// the command script writes it and the kubelet reports it.
	Result string
}

// Simulator is the fake Trainer controller.
type Simulator struct {
	// Decide picks each job's behavior; nil means RunLocally.
	Decide func(tj *trainer.TrainJob) Behavior
	Logs   *LogStore

	// client writes and reads straight from the apiserver: a cache lagging behind its own writes
	// (a pod deleted on suspend, recreated on resume) would make it skip steps.
	client  client.Client
	started sync.Map // types.UID → struct{}: local runs begun
}

// Start runs the simulator until ctx ends.
func Start(ctx context.Context, cfg *rest.Config, decide func(*trainer.TrainJob) Behavior) (*Simulator, error) {
	s := &Simulator{Decide: decide, Logs: NewLogStore()}
	scheme, err := trainjob.NewScheme()
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, fmt.Errorf("starting the Trainer simulator: %w", err)
	}
	s.client, err = client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("starting the Trainer simulator: %w", err)
	}
	err = ctrl.NewControllerManagedBy(mgr).
		For(&trainer.TrainJob{}).
		Owns(&corev1.Pod{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: 8}).
		Complete(reconcile.Func(s.reconcile))
	if err != nil {
		return nil, fmt.Errorf("starting the Trainer simulator: %w", err)
	}
	errc := make(chan error, 1)
	go func() { errc <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("starting the Trainer simulator: %w", errors.Join(ctx.Err(), <-errc))
	}
	return s, nil
}

func (s *Simulator) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	tj := &trainer.TrainJob{}
	if err := s.client.Get(ctx, req.NamespacedName, tj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if terminal(tj) || !tj.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	if ptr.Deref(tj.Spec.Suspend, false) {
		// A suspended JobSet has no pods.
		if err := s.client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(tj.Namespace),
			client.MatchingLabels{trainjob.LabelJobSetName: tj.Name}); err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, s.setCondition(ctx, tj, metav1.Condition{Type: trainer.TrainJobSuspended, Status: metav1.ConditionTrue,
			Reason: trainer.TrainJobSuspendedReason, Message: "TrainJob is suspended"})
	}
	if c := apimeta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobSuspended); c != nil && c.Status == metav1.ConditionTrue {
		if err := s.setCondition(ctx, tj, metav1.Condition{Type: trainer.TrainJobSuspended, Status: metav1.ConditionFalse,
			Reason: trainer.TrainJobResumedReason, Message: "TrainJob is resumed"}); err != nil {
			return reconcile.Result{}, err
		}
	}
	b := Behavior{Mode: RunLocally}
	if s.Decide != nil {
		b = s.Decide(tj)
	}
	if b.Mode == NoResources {
		return reconcile.Result{}, nil
	}
	rt, err := s.runtime(ctx, tj)
	if err != nil {
		return reconcile.Result{}, err
	}
	pods, err := s.ensurePods(ctx, tj, rt)
	if err != nil {
		return reconcile.Result{}, err
	}
	switch b.Mode {
	case Hold:
		return reconcile.Result{}, nil
	case RunLocally:
		if _, dup := s.started.LoadOrStore(tj.UID, struct{}{}); !dup {
			go s.runLocally(context.WithoutCancel(ctx), tj.DeepCopy(), rt, pods)
		}
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, s.Finish(ctx, tj.Namespace, tj.Name, b)
}

func (s *Simulator) runtime(ctx context.Context, tj *trainer.TrainJob) (*runtimes.Runtime, error) {
	cat, err := runtimes.ClusterSource{Reader: s.client}.List(ctx, tj.Namespace)
	if err != nil {
		return nil, err
	}
	for i := range cat.Runtimes {
		r := &cat.Runtimes[i]
		if r.Name == tj.Spec.RuntimeRef.Name && r.Kind == ptr.Deref(tj.Spec.RuntimeRef.Kind, runtimes.ClusterKind) {
			return r, nil
		}
	}
	// The real controller reports this as TrainingRuntimeNotSupported; a test never wants it.
	return nil, reconcile.TerminalError(fmt.Errorf("TrainJob %s/%s names runtime %s, which does not exist", tj.Namespace, tj.Name, tj.Spec.RuntimeRef.Name))
}

// PodName is the name the simulator gives node i's pod (JobSet: <jobset>-<rjob>-<job>-<pod>).
func PodName(job string, i int) string { return fmt.Sprintf("%s-node-0-%d", job, i) }

func (s *Simulator) ensurePods(ctx context.Context, tj *trainer.TrainJob, rt *runtimes.Runtime) ([]string, error) {
	n := int(rt.NumNodes)
	if tj.Spec.Trainer != nil && tj.Spec.Trainer.NumNodes != nil {
		n = int(*tj.Spec.Trainer.NumNodes)
	}
	names := make([]string, n)
	for i := range n {
		names[i] = PodName(tj.Name, i)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: names[i], Namespace: tj.Namespace, Labels: map[string]string{
			trainjob.LabelJobSetName:       tj.Name,
			trainjob.LabelReplicatedJob:    trainjob.NodeJob,
			"jobset.sigs.k8s.io/job-index": "0",
			trainjob.LabelCompletionIndex:  strconv.Itoa(i),
			runtimes.AncestorLabel:         runtimes.AncestorTrainer,
		}}}
		// As the Trainer merges spec.runtimePatches into the node job's pod template.
		for k, v := range patchedPodLabels(tj, trainjob.NodeJob) {
			pod.Labels[k] = v
		}
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
		c := corev1.Container{Name: trainjob.NodeContainer, Image: rt.Image}
		if t := tj.Spec.Trainer; t != nil {
			c.Command, c.Args, c.Env = t.Command, t.Args, t.Env
			if t.Image != nil {
				c.Image = *t.Image
			}
		}
		pod.Spec.Containers = []corev1.Container{c}
		if err := controllerutil.SetControllerReference(tj, pod, s.client.Scheme()); err != nil {
			return nil, err
		}
		if err := s.client.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating pod %s: %w", pod.Name, err)
		}
		if err := s.setPodPhase(ctx, tj.Namespace, names[i], corev1.PodRunning, false); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// setPodPhase moves a pod forward; onlyFrom running keeps a finished pod finished.
func (s *Simulator) setPodPhase(ctx context.Context, ns, name string, phase corev1.PodPhase, force bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod := &corev1.Pod{}
		if err := s.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, pod); err != nil {
			return err
		}
		if pod.Status.Phase == phase || (!force && (pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed)) {
			return nil
		}
		pod.Status.Phase = phase
		if phase == corev1.PodRunning && pod.Status.StartTime == nil {
			now := metav1.Now()
			pod.Status.StartTime = &now
		}
		return s.client.Status().Update(ctx, pod)
	})
}

// setTerminationMessage reports the node container as terminated with msg, as the kubelet does
// from /dev/termination-log.
func (s *Simulator) setTerminationMessage(ctx context.Context, ns, name, msg string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod := &corev1.Pod{}
		if err := s.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, pod); err != nil {
			return err
		}
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: trainjob.NodeContainer, Image: pod.Spec.Containers[0].Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", Message: msg}}}}
		return s.client.Status().Update(ctx, pod)
	})
}

func (s *Simulator) runLocally(ctx context.Context, tj *trainer.TrainJob, rt *runtimes.Runtime, pods []string) {
	runner := &local.Runner{OnLine: func(node int, line string) {
		if node < len(pods) {
			s.Logs.Append(tj.Namespace, pods[node], line)
		}
	}}
	res, err := runner.Run(ctx, tj, rt)
	b := Behavior{Mode: Succeed}
	switch {
	case err != nil:
		b = Behavior{Mode: Fail, Log: []string{"trainstep simulator: " + err.Error()}}
	case res.TrainJob != nil && apimeta.IsStatusConditionTrue(res.TrainJob.Status.Conditions, trainer.TrainJobFailed):
		b = Behavior{Mode: Fail, FailNode: max(res.Culprit, 0)}
	default:
		b.Result = res.Result.Value
	}
	for _, p := range pods {
		s.Logs.Close(tj.Namespace, p)
	}
	_ = s.Finish(ctx, tj.Namespace, tj.Name, b) // the job may have been deleted meanwhile
}

// Finish ends a job as the Trainer would: pods to Succeeded (or one to Failed), then the TrainJob
// condition copied from the JobSet.
func (s *Simulator) Finish(ctx context.Context, ns, name string, b Behavior) error {
	tj := &trainer.TrainJob{}
	if err := s.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, tj); err != nil {
		return err
	}
	pods := &corev1.PodList{}
	if err := s.client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{trainjob.LabelJobSetName: name}); err != nil {
		return err
	}
	for _, p := range pods.Items {
		idx, _ := strconv.Atoi(p.Labels[trainjob.LabelCompletionIndex])
		phase := corev1.PodSucceeded
		if b.Mode == Fail && idx == b.FailNode {
			phase = corev1.PodFailed
		}
		for _, l := range b.Log {
			s.Logs.Append(ns, p.Name, l)
		}
		if len(b.Log) > 0 {
			s.Logs.Close(ns, p.Name)
		}
		if err := s.setPodPhase(ctx, ns, p.Name, phase, true); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if b.Result != "" && idx == 0 {
			if err := s.setTerminationMessage(ctx, ns, p.Name, `{"`+trainjob.ResultMarker+`":`+b.Result+`}`); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	cond := metav1.Condition{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: "AllJobsCompleted", Message: "jobset completed successfully"}
	if b.Mode == Fail {
		cond = metav1.Condition{Type: trainer.TrainJobFailed, Status: metav1.ConditionTrue, Reason: "FailedJobs", Message: "jobset failed due to one or more job failures"}
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := s.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, tj); err != nil {
			return err
		}
		if b.Progress != nil || len(b.Metrics) > 0 {
			ts := &trainer.TrainerStatus{ProgressPercentage: b.Progress, LastUpdatedTime: metav1.Now()}
			for k, v := range b.Metrics {
				ts.Metrics = append(ts.Metrics, trainer.Metric{Name: k, Value: v})
			}
			tj.Status.TrainerStatus = ts
		}
		apimeta.SetStatusCondition(&tj.Status.Conditions, cond)
		return s.client.Status().Update(ctx, tj)
	})
}

func (s *Simulator) setCondition(ctx context.Context, tj *trainer.TrainJob, c metav1.Condition) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &trainer.TrainJob{}
		if err := s.client.Get(ctx, client.ObjectKeyFromObject(tj), cur); err != nil {
			return client.IgnoreNotFound(err)
		}
		if !apimeta.SetStatusCondition(&cur.Status.Conditions, c) {
			return nil
		}
		return s.client.Status().Update(ctx, cur)
	})
}

func terminal(tj *trainer.TrainJob) bool {
	return apimeta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete) ||
		apimeta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobFailed)
}

// patchedPodLabels are the pod template labels the TrainJob's runtimePatches give a replicated job.
func patchedPodLabels(tj *trainer.TrainJob, job string) map[string]string {
	out := map[string]string{}
	for _, p := range tj.Spec.RuntimePatches {
		if p.TrainingRuntimeSpec == nil || p.TrainingRuntimeSpec.Template == nil || p.TrainingRuntimeSpec.Template.Spec == nil {
			continue
		}
		for _, rj := range p.TrainingRuntimeSpec.Template.Spec.ReplicatedJobs {
			if rj.Name != job || rj.Template == nil || rj.Template.Spec == nil || rj.Template.Spec.Template == nil || rj.Template.Spec.Template.Metadata == nil {
				continue
			}
			for k, v := range rj.Template.Spec.Template.Metadata.Labels {
				out[k] = v
			}
		}
	}
	return out
}
