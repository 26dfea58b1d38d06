// Package schema derives the JSON Schema of a training step from the Go types that parse it, so
// the schema editors use can never drift from what trainstep accepts.
package schema

import (
	"encoding/json"
	"reflect"
	"sort"

	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/core/trainers"
)

// descriptions are shown by editors; keys are JSON field names.
var descriptions = map[string]string{
	"framework":               "Picks the trainer (torch→TorchTrainer, mpi→MPITrainer, deepspeed→DeepSpeedTrainer, jax→JAXTrainer, xgboost→XGBoostTrainer, torchtune→TorchTuneTrainer) and the runtimes discovery considers.",
	"runtime":                 "A (Cluster)TrainingRuntime to use instead of discovering one by its trainer.kubeflow.org/framework label: its name, or {name, kind}.",
	"trainer":                 "The trainer: its kind (optional when framework is set) and its fields.",
	"kind":                    "Trainer kind, or runtime kind (ClusterTrainingRuntime / TrainingRuntime).",
	"runtimeConfig":           "How the environment is prepared (KEP-285 RuntimeConfig): a set field replaces the trainer's field of the same name.",
	"initializer":             "Dataset and model initializers of the runtime.",
	"labels":                  "Labels for the TrainJob's metadata.",
	"annotations":             "Annotations for the TrainJob's metadata.",
	"queueName":               "Kueue LocalQueue (label kueue.x-k8s.io/queue-name).",
	"namePrefix":              "The TrainJob's name is <namePrefix>-<12 hex characters of the step's identity>; a DNS-1035 label of at most 20 characters (a trailing dash is dropped). Default: made from the step key.",
	"timeout":                 "Bound on the whole step, e.g. 2h; the TrainJob is deleted when it passes unless keepOnTimeout.",
	"keepOnTimeout":           "Leave the TrainJob running when the timeout passes.",
	"startTimeout":            "Fail the step, with the scheduler's or kubelet's reason, when its TrainJob has not started within this (e.g. 15m); the TrainJob is deleted. Started: an initializer pod Running or Succeeded, or every trainer node Running or Succeeded at once; once started it never applies again. A queued (Suspended) job is not bounded by it.",
	"hangTimeout":             "Fail the step as hung (failure-class hung) when its TrainJob runs and the progress its function reports through report() has not moved for this long (e.g. 30m); the TrainJob is deleted. Counts from the last report (or the last resume, when later); needs the Trainer's TrainJobStatus gate; a job that never reported is never hung.",
	"func":                    "Python source that defines the training function.",
	"funcName":                "The function to call; optional when func defines exactly one top-level function.",
	"funcArgs":                "Keyword arguments, passed as Python literals.",
	"numNodes":                "Number of training nodes (spec.trainer.numNodes).",
	"resourcesPerNode":        "Resources per node, requests = limits: cpu, memory, ephemeral-storage, hugepages-<size>, gpu (nvidia.com/gpu), storage (ephemeral-storage), mig-<profile>, in any case, or a resource name with its domain (example.com/device).",
	"image":                   "Trainer image (spec.trainer.image); the runtime's image when empty.",
	"env":                     "Environment variables.",
	"packagesToInstall":       "pip packages installed before the function runs.",
	"pipIndexUrls":            "pip index URLs: the first is --index-url, the rest --extra-index-url.",
	"maxRestarts":             "torchrun --max-restarts (sent as PET_MAX_RESTARTS).",
	"monitorInterval":         "torchrun --monitor-interval in seconds (sent as PET_MONITOR_INTERVAL).",
	"numProcPerNode":          "Processes per node (spec.trainer.numProcPerNode).",
	"deepspeedConfig":         "DeepSpeed config object (or a path in the image); reaches the function as env DEEPSPEED_CONFIG.",
	"command":                 "Container command (CustomTrainerContainer).",
	"args":                    "Container args (CustomTrainerContainer).",
	"config":                  "torchtune config overrides, key=value (nested keys with dots), for keys no named field sets.",
	"dtype":                   "TorchTuneTrainer: dtype=bf16 or fp32 (the SDK's DataType).",
	"batchSize":               "TorchTuneTrainer: batch_size.",
	"epochs":                  "TorchTuneTrainer: epochs.",
	"loss":                    "TorchTuneTrainer: loss, such as torchtune.modules.loss.CEWithChunkedOutputLoss.",
	"peftConfig":              "TorchTuneTrainer: the SDK's peft_config (LoraConfig), as model.* overrides; LoRA (the Trainer then picks a LoRA recipe), QLoRA with quantizeBase, DoRA with useDora.",
	"applyLoraToMlp":          "model.apply_lora_to_mlp.",
	"applyLoraToOutput":       "model.apply_lora_to_output.",
	"loraAttnModules":         "model.lora_attn_modules: q_proj, k_proj, v_proj, output_proj; default [q_proj, v_proj, output_proj] as in the SDK.",
	"loraRank":                "model.lora_rank.",
	"loraAlpha":               "model.lora_alpha.",
	"loraDropout":             "model.lora_dropout, 0 up to 1.",
	"quantizeBase":            "model.quantize_base (QLoRA).",
	"useDora":                 "model.use_dora (DoRA).",
	"datasetPreprocessConfig": "TorchTuneTrainer: the SDK's dataset_preprocess_config (TorchTuneInstructDataset): dataset=torchtune.datasets.instruct_dataset and dataset.* overrides.",
	"source":                  "dataset.source: json, csv, parquet, arrow, text or xml.",
	"split":                   "dataset.split, such as train or train[:10%].",
	"trainOnInput":            "dataset.train_on_input.",
	"newSystemPrompt":         "dataset.new_system_prompt.",
	"columnMap":               "dataset.column_map: input and output (and image) to the data's column names.",
	"storageUri":              "Where to download from, e.g. hf://tatsu-lab/alpaca or s3://bucket/path.",
	"secretRef":               "A Secret in the step's namespace whose keys become env (initializer: its name, or {name: …} as in a TrainJob).",
	"pod":                     "Where the pods run and what they run with. Reaches the pods through spec.runtimePatches (Trainer v2.2+, manager trainstep.dev/trainstep) or spec.podTemplateOverrides (v2.1), read from the installed TrainJob CRD.",
	"nodeSelector":            "Node labels every pod of the job must match.",
	"tolerations":             "Taints every pod of the job tolerates (Kubernetes tolerations).",
	"affinity":                "Kubernetes affinity for every pod of the job.",
	"priorityClassName":       "Refused with the alternative: no Trainer release lets a TrainJob set pod priority.",
	"schedulingGates":         "Scheduling gate names; the pods wait until something removes them.",
	"serviceAccountName":      "ServiceAccount every pod of the job runs as.",
	"imagePullSecrets":        "Names of Secrets for pulling images.",
	"volumes":                 "Pod volumes in Kubernetes' shape: a name and exactly one source (persistentVolumeClaim, secret, configMap, emptyDir, csi, nfs, ephemeral, projected, downwardAPI, image, …). hostPath is refused: a training step must not mount the node's filesystem.",
	"volumeMounts":            "Mounts of pod.volumes into the trainer container (name, mountPath, subPath, readOnly).",
	"envFrom":                 "Every key of a Secret (secretRef) or ConfigMap (configMapRef) as trainer env, with an optional prefix. No Trainer release carries envFrom: trainstep mounts each object and the command script exports its keys (function trainers, or a container command [bash, -c, script]).",
}

// Step returns the JSON Schema (draft 2020-12) of a step for the given trainer registry.
func Step(reg *trainers.Registry) map[string]any {
	root := object(reflect.TypeOf(step.Spec{}))
	root["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	root["$id"] = "https://trainstep.dev/schemas/step.schema.json"
	root["title"] = "trainstep training step"
	props := root["properties"].(map[string]any)

	perKind := trainerProperties(reg)
	trainerProps := map[string]any{} // every kind's fields: what an editor offers before it knows the kind
	for _, kp := range perKind {
		for k, v := range kp.props {
			trainerProps[k] = v
		}
	}
	var kinds, frameworks []any
	for _, r := range reg.Kinds() {
		kinds = append(kinds, r.Kind)
	}
	for _, f := range reg.Frameworks() {
		frameworks = append(frameworks, f)
	}
	trainerProps["kind"] = map[string]any{"type": "string", "enum": kinds, "description": descriptions["kind"]}
	props["trainer"] = map[string]any{"type": "object", "properties": trainerProps, "additionalProperties": false, "description": descriptions["trainer"]}
	root["allOf"] = kindRules(perKind)
	props["apiVersion"] = map[string]any{"type": "string", "const": step.APIVersion, "description": "Optional: what this file is (" + step.APIVersion + ")."}
	props["kind"] = map[string]any{"type": "string", "const": step.Kind, "description": "Optional: what this file is (" + step.Kind + ")."}
	props["framework"] = map[string]any{"type": "string", "description": descriptions["framework"], "examples": frameworks}
	props["timeout"] = map[string]any{"type": []any{"string", "number"}, "description": descriptions["timeout"]}
	props["startTimeout"] = map[string]any{"type": []any{"string", "number"}, "description": descriptions["startTimeout"]}
	props["hangTimeout"] = map[string]any{"type": []any{"string", "number"}, "description": descriptions["hangTimeout"]}
	props["runtime"] = runtimeRef()
	podProps := props["pod"].(map[string]any)["properties"].(map[string]any)
	// hostPath parses (so it is refused by name, with why) but editors should not offer it.
	delete(podProps["volumes"].(map[string]any)["items"].(map[string]any)["properties"].(map[string]any), "hostPath")
	podProps["env"].(map[string]any)["description"] = "Trainer env from Secret or ConfigMap keys: NAME: {secretKeyRef: {name, key}} or {configMapKeyRef: {name, key}} (→ spec.trainer.env valueFrom)."
	checkpoint(props["checkpoint"].(map[string]any))
	cache(props["cache"].(map[string]any))
	retry(props["retry"].(map[string]any))
	root["required"] = []any{"trainer"}
	return root
}

// runtimeRef is the runtime's name alone, as the SDK's train(runtime=...) takes it, or {name, kind}.
func runtimeRef() map[string]any {
	obj := object(reflect.TypeOf(step.RuntimeRef{}))
	obj["properties"].(map[string]any)["kind"] = map[string]any{"type": "string",
		"enum": []any{step.ClusterTrainingRuntime, step.TrainingRuntime}}
	return map[string]any{"anyOf": []any{map[string]any{"type": "string"}, obj}, "description": descriptions["runtime"]}
}

// cache describes the cache block: maxAge is a duration like timeout, and required.
func cache(c map[string]any) {
	c["description"] = "Serves the step from the outputs of the same step that succeeded in its namespace within maxAge, instead of training again (docs/cache.md)."
	props := c["properties"].(map[string]any)
	props["maxAge"] = map[string]any{"type": []any{"string", "number"}, "description": "How old a stored result may be and still be used: a duration such as 24h, or seconds."}
	props["salt"].(map[string]any)["description"] = "Enters the cache key: what decides the training that trainstep cannot see in the TrainJob, such as a dataset version behind a fixed URI."
	props["refresh"].(map[string]any)["description"] = "Trains again, whatever is stored, and stores the new result in its place."
	c["required"] = []any{"maxAge"}
}

// retry describes the retry block: limit is required and bounded, backoff a duration.
func retry(r map[string]any) {
	r["description"] = "Runs the step again, as a new TrainJob that resumes from its checkpoint, when it fails for a retryable cause (failure-class oom, preempted, evicted, node-lost, image, unschedulable, initializer, hung; docs/failures.md)."
	props := r["properties"].(map[string]any)
	props["limit"] = map[string]any{"type": "integer", "minimum": 1, "maximum": step.MaxRetries, "description": "How many times the step is run again after its first TrainJob."}
	props["backoff"] = map[string]any{"type": []any{"string", "number"}, "description": "How long after a failed TrainJob ended the next one is created (e.g. 30s); default at once. A job a deadline ended (startTimeout, hangTimeout) is retried at once."}
	r["required"] = []any{"limit"}
}

// checkpoint describes the checkpoint block here, not in descriptions: its path and volume are
// names other blocks use for other things.
func checkpoint(c map[string]any) {
	c["description"] = "Where the step's checkpoints live, the same for every attempt and node, so a retry resumes (docs/resume.md): a directory on a volume the pod block mounts (env " +
		step.CheckpointDirEnv + "), or an object-store URI passed through (env " + step.CheckpointURIEnv + "). Exactly one of volume and uri."
	props := c["properties"].(map[string]any)
	props["volume"].(map[string]any)["description"] = "One of pod.volumes that pod.volumeMounts mounts, writable."
	props["path"].(map[string]any)["description"] = "Sub-directory of the volume's mountPath, relative, without .. (default: the step's own, " + step.DefaultCheckpointPath + "/<owner>/<step key>, shared by its attempts)."
	props["uri"].(map[string]any)["description"] = "An object-store URI such as s3://bucket/prefix or gs://bucket/prefix; trainstep only passes it to the trainer."
	c["oneOf"] = []any{
		map[string]any{"required": []any{"volume"}, "not": map[string]any{"required": []any{"uri"}}},
		map[string]any{"required": []any{"uri"}, "not": map[string]any{"anyOf": []any{map[string]any{"required": []any{"volume"}}, map[string]any{"required": []any{"path"}}}}},
	}
}

// kindProperties is one trainer kind's own fields and the frameworks that pick it.
type kindProperties struct {
	kind       string
	frameworks []string
	props      map[string]any
}

// trainerProperties reads each registered kind's fields off what its factory makes of an empty
// trainer block, so a new ("Tier 2") trainer's fields reach the schema with no change here. A
// factory that makes nothing of an empty block contributes no fields.
func trainerProperties(reg *trainers.Registry) []kindProperties {
	var out []kindProperties
	for _, r := range reg.Kinds() {
		fw := ""
		if len(r.Frameworks) > 0 {
			fw = r.Frameworks[0]
		}
		t, _ := r.New(fw, json.RawMessage("{}")) // an empty block may be invalid; its type is all that is read
		if t == nil || deref(reflect.TypeOf(t)).Kind() != reflect.Struct {
			continue
		}
		out = append(out, kindProperties{kind: r.Kind, frameworks: r.Frameworks, props: object(deref(reflect.TypeOf(t)))["properties"].(map[string]any)})
	}
	return out
}

// kindRules narrow the trainer block to one kind's fields once the kind is known: trainer.kind
// names it, or (with no trainer.kind) framework picks it. Editors then complete and check that
// kind's fields only.
func kindRules(perKind []kindProperties) []any {
	var rules []any
	for _, kp := range perKind {
		named := map[string]any{
			"properties": map[string]any{"trainer": map[string]any{
				"properties": map[string]any{"kind": map[string]any{"const": kp.kind}}, "required": []any{"kind"}}},
			"required": []any{"trainer"},
		}
		when := []any{named}
		if len(kp.frameworks) > 0 {
			fws := make([]any, len(kp.frameworks))
			for i, f := range kp.frameworks {
				fws[i] = f
			}
			when = append(when, map[string]any{
				"properties": map[string]any{
					"framework": map[string]any{"enum": fws},
					"trainer":   map[string]any{"not": map[string]any{"required": []any{"kind"}}},
				},
				"required": []any{"framework"},
			})
		}
		props := map[string]any{"kind": map[string]any{"const": kp.kind}}
		for k, v := range kp.props {
			props[k] = v
		}
		rules = append(rules, map[string]any{
			"if": map[string]any{"anyOf": when},
			"then": map[string]any{"properties": map[string]any{"trainer": map[string]any{
				"properties": props, "additionalProperties": false, "description": kp.kind + "'s fields."}}},
		})
	}
	return rules
}

func object(t reflect.Type) map[string]any {
	props := map[string]any{}
	addFields(t, props)
	return map[string]any{"type": "object", "properties": props, "additionalProperties": false}
}

func addFields(t reflect.Type, props map[string]any) {
	for name, ft := range step.JSONFields(t) {
		s := typeSchema(ft)
		if d, ok := descriptions[name]; ok {
			s["description"] = d
		}
		props[name] = s
	}
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func typeSchema(t reflect.Type) map[string]any {
	t = deref(t)
	switch t {
	case reflect.TypeOf(json.Number("")):
		return map[string]any{"type": "number"}
	case reflect.TypeOf(step.Env(nil)): // a mapping in the user's order
		return map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}}
	case reflect.TypeOf(step.Object(nil)):
		return map[string]any{"type": "object"}
	case reflect.TypeOf(step.SecretRef{}): // the name alone, or the TrainJob's {name}
		return map[string]any{"anyOf": []any{map[string]any{"type": "string"}, object(t)}}
	}
	if reflect.PointerTo(t).Implements(reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()) {
		return map[string]any{} // decoded by its own code (Duration, TrainerSpec); Step fills these in
	}
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int32, reflect.Int64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": typeSchema(t.Elem())}
	case reflect.Map:
		if t.Elem().Kind() == reflect.Interface {
			return map[string]any{"type": "object"}
		}
		return map[string]any{"type": "object", "additionalProperties": typeSchema(t.Elem())}
	case reflect.Struct:
		return object(t)
	}
	return map[string]any{} // any value (funcArgs values, deepspeedConfig)
}

// Marshal renders the schema with sorted keys and a trailing newline.
func Marshal(s map[string]any) ([]byte, error) {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// keys is used by tests to list a schema object's properties.
func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
