package trainjob

import (
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainstep/trainstep/core/runtimes"
)

// maxPodName is the DNS-1035 label limit JobSet's webhook applies to the pod names it will make.
const maxPodName = 63

// longestPodName is JobSet's own reckoning (sigs.k8s.io/jobset v0.12.0,
// pkg/webhooks/jobset_webhook.go): the JobSet takes the TrainJob's name, pods are
// <jobset>-<replicatedJob>-<last job index>-<last pod index>-<5 random characters>, and the
// Trainer sets the trainer job's completions to the node count.
func longestPodName(name string, rj runtimes.ReplicatedJob, numNodes int32) string {
	completions := rj.Completions
	if rj.Ancestor == runtimes.AncestorTrainer && numNodes > completions {
		completions = numNodes
	}
	return fmt.Sprintf("%s-%s-%s-%s-xxxxx", name, rj.Name,
		strconv.Itoa(int(max(rj.Replicas, 1)-1)), strconv.Itoa(int(max(completions, 1)-1)))
}

// checkPodNames refuses a runtime whose replicated-job names leave no room for a TrainJob name
// of MaxNameLength: JobSet's webhook would refuse the JobSet, and the Trainer would only say so in
// an Event while the step waits.
func checkPodNames(rt *runtimes.Runtime, numNodes int32) field.ErrorList {
	var errs field.ErrorList
	worst := fmt.Sprintf("%0*d", MaxNameLength, 0)
	for i, rj := range rt.ReplicatedJobs {
		pod := longestPodName(worst, rj, numNodes)
		if len(pod) <= maxPodName {
			continue
		}
		room := len(rj.Name) - (len(pod) - maxPodName)
		errs = append(errs, field.Invalid(field.NewPath("runtime", "name"), rt.Name, fmt.Sprintf(
			"replicated job %d of runtime %s is named %q: with a TrainJob name of %d characters, JobSet would name its pods with %d characters and its webhook refuses more than %d; name that replicated job with at most %d characters",
			i, rt.Name, rj.Name, MaxNameLength, len(pod), maxPodName, max(room, 0))))
	}
	return errs
}
