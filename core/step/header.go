package step

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// headerErrors checks apiVersion and kind of a step document before anything else: a file that
// names another kind (a TrainJob pasted in, say) is told so once, rather than with one "unknown
// field" per key of a shape that was never a step.
func headerErrors(js []byte) field.ErrorList {
	var doc map[string]any
	if err := json.Unmarshal(js, &doc); err != nil {
		return nil // not an object: DecodeStrict says so in its own words
	}
	var errs field.ErrorList
	for _, h := range []struct {
		key, want string
	}{{"apiVersion", APIVersion}, {"kind", Kind}} {
		v, ok := doc[h.key]
		if !ok {
			continue
		}
		s, isString := v.(string)
		if !isString {
			errs = append(errs, field.Invalid(field.NewPath(h.key), v, fmt.Sprintf("must be the string %q (or left out)", h.want)))
			continue
		}
		errs = append(errs, headerField(h.key, s, h.want, doc)...)
	}
	return errs
}

// headerField checks one of apiVersion and kind; empty is allowed, as when the key is absent.
func headerField(key, got, want string, doc map[string]any) field.ErrorList {
	if got == "" || got == want {
		return nil
	}
	msg := fmt.Sprintf("must be %s (or left out): this is read as a trainstep step", want)
	if looksLikeTrainJob(doc) {
		msg += "; a Kubeflow TrainJob is not a step: write the training (framework, trainer, runtime, initializer, pod) and trainstep makes the TrainJob (see examples/steps)"
	}
	return field.ErrorList{field.Invalid(field.NewPath(key), got, msg)}
}

// looksLikeTrainJob tells a pasted TrainJob (or another Kubeflow Trainer object) by its group.
func looksLikeTrainJob(doc map[string]any) bool {
	v, _ := doc["apiVersion"].(string)
	k, _ := doc["kind"].(string)
	return strings.HasPrefix(v, "trainer.kubeflow.org/") || k == "TrainJob"
}

// validateHeader is headerErrors for a Spec built in code rather than parsed.
func (s *Spec) validateHeader() field.ErrorList {
	doc := map[string]any{"apiVersion": s.APIVersion, "kind": s.Kind}
	return append(headerField("apiVersion", s.APIVersion, APIVersion, doc), headerField("kind", s.Kind, Kind, doc)...)
}
