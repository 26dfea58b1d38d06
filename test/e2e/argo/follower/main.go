// Command follower is the client side of two ways BenchmarkSideBySide compares with trainstep:
// it creates N TrainJobs, then follows each until a terminal condition, either with a GET every
// --interval (what the Kubeflow SDK's wait_for_job_status does, every 2 s) or with a client-go
// watch on it (the floor). It runs as a process of its own so that its memory can be measured
// apart from the benchmark's.
//
// Output, one line each: "created NAME" per TrainJob, "ready" once every TrainJob is created and
// followed (first GET done or watch open), "notice NAME UNIXNANO CONDITION" when it notices a
// TrainJob's terminal condition. It exits 0 once every TrainJob is noticed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
)

var trainJobs = schema.GroupVersionResource{Group: "trainer.kubeflow.org", Version: "v1alpha1", Resource: "trainjobs"}

type options struct {
	kubeconfig, namespace, mode, prefix, runtime string
	labels                                       map[string]string
	steps                                        int
	interval                                     time.Duration
}

func main() {
	var o options
	var labels string
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig")
	flag.StringVar(&o.namespace, "namespace", "", "namespace of the TrainJobs")
	flag.StringVar(&o.mode, "mode", "poll", "poll or watch")
	flag.StringVar(&o.prefix, "prefix", "", "TrainJob names are PREFIX-0 ... PREFIX-(N-1)")
	flag.StringVar(&o.runtime, "runtime", "", "the TrainJobs' ClusterTrainingRuntime")
	flag.StringVar(&labels, "labels", "", "k=v,... labels of every TrainJob (bench-step=i is added)")
	flag.IntVar(&o.steps, "steps", 1, "how many TrainJobs")
	flag.DurationVar(&o.interval, "interval", 2*time.Second, "poll interval")
	flag.Parse()
	o.labels = map[string]string{}
	for _, kv := range strings.Split(labels, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			o.labels[k] = v
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "follower:", err)
		os.Exit(1)
	}
}

// out serialises the output lines of the goroutines.
type out struct{ mu sync.Mutex }

func (w *out) line(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fmt.Printf(format+"\n", args...)
}

func run(ctx context.Context, o options) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS = -1 // no client-side rate limit: the SDK has none, and N polls every 2 s would exceed 5 QPS
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	tjs := dc.Resource(trainJobs).Namespace(o.namespace)
	w := &out{}

	created := make([]*unstructured.Unstructured, o.steps)
	for i := range o.steps {
		if created[i], err = tjs.Create(ctx, trainJob(o, i), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating TrainJob %d: %w", i, err)
		}
		w.line("created %s", created[i].GetName())
	}

	var ready, wg sync.WaitGroup
	errs := make([]error, o.steps)
	ready.Add(o.steps)
	for i, tj := range created {
		wg.Go(func() {
			var cond string
			var err error
			if o.mode == "watch" {
				cond, err = watchUntilTerminal(ctx, tjs, tj, ready.Done)
			} else {
				cond, err = pollUntilTerminal(ctx, tjs, tj.GetName(), o.interval, ready.Done)
			}
			if err != nil {
				errs[i] = fmt.Errorf("following %s: %w", tj.GetName(), err)
				return
			}
			w.line("notice %s %d %s", tj.GetName(), time.Now().UnixNano(), cond)
		})
	}
	ready.Wait()
	w.line("ready")
	wg.Wait()
	return errors.Join(errs...)
}

// trainJob is the TrainJob a user submits: the runtime, one node, a command.
func trainJob(o options, i int) *unstructured.Unstructured {
	labels := map[string]any{"bench-step": strconv.Itoa(i)}
	for k, v := range o.labels {
		labels[k] = v
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "trainer.kubeflow.org/v1alpha1",
		"kind":       "TrainJob",
		"metadata":   map[string]any{"name": fmt.Sprintf("%s-%d", o.prefix, i), "labels": labels},
		"spec": map[string]any{
			"runtimeRef": map[string]any{"name": o.runtime},
			"trainer": map[string]any{
				"numNodes": int64(1),
				"command":  []any{"python3", "-c", "print('trained')"},
			},
		},
	}}
}

// terminal is the type of the TrainJob's terminal condition (Complete or Failed), "" if none.
func terminal(tj *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(tj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if (m["type"] == "Complete" || m["type"] == "Failed") && m["status"] == "True" {
			return m["type"].(string)
		}
	}
	return ""
}

// pollUntilTerminal GETs the TrainJob every interval, like the SDK: get, check, sleep.
func pollUntilTerminal(ctx context.Context, tjs dynamic.ResourceInterface, name string, interval time.Duration, ready func()) (string, error) {
	first := true
	for {
		tj, err := tjs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if first {
			ready()
			first = false
		}
		if cond := terminal(tj); cond != "" {
			return cond, nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(interval): // the SDK's time.sleep(polling_interval): the behaviour measured
		}
	}
}

// watchUntilTerminal watches the one TrainJob from its creation on, again from the last version
// seen if the watch ends.
func watchUntilTerminal(ctx context.Context, tjs dynamic.ResourceInterface, tj *unstructured.Unstructured, ready func()) (string, error) {
	rv := tj.GetResourceVersion()
	sel := fields.OneTermEqualSelector("metadata.name", tj.GetName()).String()
	first := true
	for {
		w, err := tjs.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			return "", err
		}
		if first {
			ready()
			first = false
		}
		for ev := range w.ResultChan() {
			switch ev.Type {
			case watch.Error:
				w.Stop()
				return "", apierrors.FromObject(ev.Object)
			case watch.Deleted:
				w.Stop()
				return "", errors.New("deleted before it was terminal")
			}
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			rv = u.GetResourceVersion()
			if cond := terminal(u); cond != "" {
				w.Stop()
				return cond, nil
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
	}
}
