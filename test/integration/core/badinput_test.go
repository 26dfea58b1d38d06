package core_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/trainstep/trainstep/internal/cli"
	"github.com/trainstep/trainstep/test/internal/testenv"
)

// Each bad step goes through `executor run` against the real apiserver: exit code 2, an error that
// names the field (and the fix), and no TrainJob created.
func TestBadInputNamesTheFieldAndCreatesNothing(t *testing.T) {
	ns := env.Namespace(t)
	f := "func: " + pyFunc
	cases := []struct {
		name, step, field, hint string
	}{
		{"unknown top-level key", "framwork: torch\ntrainer: {" + f + "}", "framwork", `did you mean "framework"?`},
		{"unknown trainer key", "framework: torch\ntrainer: {" + f + ", numNode: 2}", "trainer.numNode", `did you mean "numNodes"?`},
		{"unknown torch key", "framework: torch\ntrainer: {" + f + ", max_restarts: 2}", "trainer.max_restarts", `"maxRestarts"`},
		{"unknown runtimeConfig key", "framework: torch\ntrainer: {" + f + "}\nruntimeConfig: {packages: [x]}", "runtimeConfig.packages", `"packagesToInstall"`},
		{"unknown initializer key", "framework: torch\ntrainer: {" + f + "}\ninitializer: {data: {}}", "initializer.data", "known fields here"},
		{"no framework or kind", "trainer: {" + f + "}", "framework", "or trainer.kind"},
		{"unknown framework", "framework: tensorflow\ntrainer: {" + f + "}", "framework", "trainer.kind: CustomTrainer"},
		{"unknown trainer kind", "trainer: {kind: TFTrainer, " + f + "}", "trainer.kind", "TorchTrainer"},
		{"SDK habit, framework pytorch", "framework: pytorch\ntrainer: {" + f + "}", "framework", "write framework: torch"},
		{"SDK habit, BuiltinTrainer", "trainer: {kind: BuiltinTrainer, config: {epochs: 1}}", "trainer.kind", "trainer.kind: TorchTuneTrainer"},
		{"SDK habit, JaxTrainer", "trainer: {kind: JaxTrainer, " + f + "}", "trainer.kind", "write trainer.kind: JAXTrainer"},
		{"SDK habit, accessToken", "framework: torchtune\ntrainer: {}\ninitializer: {model: {storageUri: 'hf://m', accessToken: hf_x}}", "initializer.model.accessToken", "secretRef: hf-token"},
		{"SDK habit, runtime name not there", "framework: torch\nruntime: torch-nope\ntrainer: {" + f + "}", "runtime.name", "available: "},
		{"missing func", "framework: torch\ntrainer: {numNodes: 1}", "trainer.func", "Python source"},
		{"func without def", "framework: torch\ntrainer: {func: 'print(1)'}", "trainer.func", "defines no top-level function"},
		{"two functions, no name", "framework: torch\ntrainer: {func: \"def a(): pass\\ndef b(): pass\\n\"}", "trainer.funcName", "a, b"},
		{"funcName not defined", "framework: torch\ntrainer: {" + f + ", funcName: main}", "trainer.funcName", "defines: train"},
		{"numNodes zero", "framework: torch\ntrainer: {" + f + ", numNodes: 0}", "trainer.numNodes", "1 or more"},
		{"numNodes not a number", "framework: torch\ntrainer: {" + f + ", numNodes: two}", "trainer.numNodes", "whole number"},
		{"numNodes fractional", "framework: torch\ntrainer: {" + f + ", numNodes: 1.5}", "trainer.numNodes", "whole number"},
		{"numProcPerNode zero", "framework: torch\ntrainer: {" + f + ", numProcPerNode: 0}", "trainer.numProcPerNode", "1 or more"},
		{"numProcPerNode auto", "framework: torch\ntrainer: {" + f + ", numProcPerNode: auto}", "trainer.numProcPerNode", "whole number"},
		{"negative maxRestarts", "framework: torch\ntrainer: {" + f + ", maxRestarts: -1}", "trainer.maxRestarts", "0 or more"},
		{"zero monitorInterval", "framework: torch\ntrainer: {" + f + ", monitorInterval: 0}", "trainer.monitorInterval", "positive"},
		{"bad cpu quantity", "framework: torch\ntrainer: {" + f + ", resourcesPerNode: {cpu: lots}}", "trainer.resourcesPerNode[cpu]", "quantity"},
		{"negative memory", "framework: torch\ntrainer: {" + f + ", resourcesPerNode: {memory: -1Gi}}", "trainer.resourcesPerNode[memory]", "quantity"},
		{"gpu and mig", "framework: torch\ntrainer: {" + f + ", resourcesPerNode: {gpu: 1, mig-1g.5gb: 1}}", "trainer.resourcesPerNode", "one kind of GPU"},
		{"image with spaces", "framework: torch\ntrainer: {" + f + ", image: 'my image'}", "trainer.image", "image reference"},
		{"reserved PET env", "framework: torch\ntrainer: {" + f + ", env: {PET_NODE_RANK: '0'}}", "trainer.env[PET_NODE_RANK]", "set by the Trainer"},
		{"reserved PET env via runtimeConfig", "framework: torch\ntrainer: {" + f + "}\nruntimeConfig: {env: {PET_NNODES: '2'}}", "runtimeConfig.env[PET_NNODES]", "trainer.numNodes"},
		{"PET_MAX_RESTARTS and maxRestarts", "framework: torch\ntrainer: {" + f + ", maxRestarts: 1, env: {PET_MAX_RESTARTS: '2'}}", "trainer.env[PET_MAX_RESTARTS]", "keep one"},
		{"DMLC env on xgboost", "framework: xgboost\ntrainer: {" + f + ", env: {DMLC_TASK_ID: '0'}}", "trainer.env[DMLC_TASK_ID]", "set by the Trainer"},
		{"bad env name", "framework: torch\ntrainer: {" + f + ", env: {'MY-VAR': x}}", "trainer.env[MY-VAR]", "environment variable name"},
		{"bad pip index url", "framework: torch\ntrainer: {" + f + "}\nruntimeConfig: {pipIndexUrls: [pypi.org/simple]}", "runtimeConfig.pipIndexUrls[0]", "http(s) URL"},
		{"pip option as package", "framework: torch\ntrainer: {" + f + ", packagesToInstall: [--upgrade]}", "trainer.packagesToInstall[0]", "pip options"},
		{"empty package", "framework: torch\ntrainer: {" + f + "}\nruntimeConfig: {packagesToInstall: ['']}", "runtimeConfig.packagesToInstall[0]", "such as torch"},
		{"funcArgs not an object", "framework: torch\ntrainer: {" + f + ", funcArgs: [1, 2]}", "trainer.funcArgs", "object"},
		{"runtime missing", "framework: torch\nruntime: {name: torch-nope}\ntrainer: {" + f + "}", "runtime.name", "available: "},
		{"runtime without name", "framework: torch\nruntime: {kind: ClusterTrainingRuntime}\ntrainer: {" + f + "}", "runtime.name", "discover"},
		{"runtime kind", "framework: torch\nruntime: {name: torch-distributed, kind: ClusterRuntime}\ntrainer: {" + f + "}", "runtime.kind", "TrainingRuntime"},
		{"runtime wrong framework", "framework: torch\nruntime: {name: jax-distributed}\ntrainer: {" + f + "}", "runtime.name", "supports frameworks [torch]"},
		{"runtime wrong trainer type", "framework: torch\nruntime: {name: torchtune-llama3.2-1b}\ntrainer: {" + f + "}", "runtime.name", "supports frameworks [torch]"},
		{"no runtime for framework", "framework: flux\ntrainer: {kind: CustomTrainer, " + f + "}", "runtime", "no runtime for CustomTrainer"},
		{"dataset initializer on a runtime without one", "framework: jax\ntrainer: {" + f + "}\ninitializer: {dataset: {storageUri: 'hf://x/y'}}", "initializer.dataset", "no dataset-initializer"},
		{"storageUri without scheme", "framework: torchtune\ntrainer: {}\ninitializer: {model: {storageUri: meta-llama/Llama}}", "initializer.model.storageUri", "scheme://"},
		{"secretRef not a name", "framework: torchtune\ntrainer: {}\ninitializer: {model: {storageUri: 'hf://m', secretRef: 'My Secret'}}", "initializer.model.secretRef", "lowercase"},
		{"torchtune dtype", "framework: torchtune\ntrainer: {dtype: fp16}", "trainer.dtype", "bf16"},
		{"torchtune nested config", "framework: torchtune\ntrainer: {config: {optimizer: {lr: 1}}}", "trainer.config[optimizer]", "dots"},
		{"container without image", "trainer: {kind: CustomTrainerContainer, command: [python]}", "trainer.image", "holds the training code"},
		{"deepspeedConfig a number", "framework: deepspeed\ntrainer: {" + f + ", deepspeedConfig: 3}", "trainer.deepspeedConfig", "object"},
		{"reserved label", "framework: torch\ntrainer: {" + f + "}\nlabels: {trainstep.dev/step: x}", "labels[trainstep.dev/step]", "set by trainstep"},
		{"bad label value", "framework: torch\ntrainer: {" + f + "}\nlabels: {team: 'a/b'}", "labels[team]", "alphanumeric"},
		{"bad annotation key", "framework: torch\ntrainer: {" + f + "}\nannotations: {'a b': x}", "annotations[a b]", "name part"},
		{"bad queue name", "framework: torch\ntrainer: {" + f + "}\nqueueName: Team_A", "queueName", "lowercase"},
		{"bad timeout", "framework: torch\ntrainer: {" + f + "}\ntimeout: 2 hours", "timeout", "duration"},
		{"zero timeout", "framework: torch\ntrainer: {" + f + "}\ntimeout: 0s", "timeout", "positive"},
		{"keepOnTimeout alone", "framework: torch\ntrainer: {" + f + "}\nkeepOnTimeout: true", "timeout", "needs a timeout"},
		{"reserved PET env via pod.env", "framework: torch\ntrainer: {" + f + "}\npod: {env: {PET_NNODES: {secretKeyRef: {name: s, key: k}}}}", "pod.env[PET_NNODES]", "set by the Trainer"},
		{"reserved DMLC env via pod.env", "framework: xgboost\ntrainer: {" + f + "}\npod: {env: {DMLC_NUM_WORKER: {configMapKeyRef: {name: c, key: k}}}}", "pod.env[DMLC_NUM_WORKER]", "trainer.numNodes"},
		{"valueFrom in trainer.env", "framework: torch\ntrainer: {" + f + ", env: {A: x, TOKEN: {valueFrom: {secretKeyRef: {name: s, key: k}}}}}", "trainer.env[TOKEN]", "goes in pod.env"},
		{"secretKeyRef in runtimeConfig.env", "framework: torch\ntrainer: {" + f + "}\nruntimeConfig: {env: {TOKEN: {secretKeyRef: {name: s, key: k}}}}", "runtimeConfig.env[TOKEN]", "goes in pod.env"},
		{"number in trainer.env", "framework: torch\ntrainer: {" + f + ", env: {EPOCHS: 3}}", "trainer.env[EPOCHS]", "quote numbers"},
		{"the SDK's runtimePatches", "framework: torch\ntrainer: {" + f + "}\nruntimePatches: [{manager: me}]", "runtimePatches", "trainstep's field for it is pod"},
		{"v2.1's podTemplateOverrides", "framework: torch\ntrainer: {" + f + "}\npodTemplateOverrides: []", "podTemplateOverrides", "field for it is pod"},
		{"unknown pod key", "framework: torch\ntrainer: {" + f + "}\npod: {nodeSelecter: {a: b}}", "pod.nodeSelecter", `did you mean "nodeSelector"?`},
		{"hostPath volume", "framework: torch\ntrainer: {" + f + "}\npod: {volumes: [{name: h, hostPath: {path: /}}]}", "pod.volumes[0].hostPath", "persistentVolumeClaim"},
		{"bad toleration", "framework: torch\ntrainer: {" + f + "}\npod: {tolerations: [{key: gpu, operator: Maybe}]}", "pod.tolerations[0].operator", "Exists"},
		{"mount of no volume", "framework: torch\ntrainer: {" + f + "}\npod: {volumeMounts: [{name: data, mountPath: /data}]}", "pod.volumeMounts[0].name", "Not found"},
		{"volume with two sources", "framework: torch\ntrainer: {" + f + "}\npod: {volumes: [{name: d, emptyDir: {}, secret: {secretName: s}}]}", "pod.volumes[0]", "exactly one volume source (has emptyDir, secret)"},
		{"secret env without key", "framework: torch\ntrainer: {" + f + "}\npod: {env: {TOKEN: {secretKeyRef: {name: hf}}}}", "pod.env[TOKEN].secretKeyRef.key", "the key"},
		{"pod env also in trainer env", "framework: torch\ntrainer: {" + f + ", env: {TOKEN: x}}\npod: {env: {TOKEN: {secretKeyRef: {name: hf, key: t}}}}", "pod.env[TOKEN]", "set it in one place"},
		{"priorityClassName", "framework: torch\ntrainer: {" + f + "}\npod: {priorityClassName: high}", "pod.priorityClassName", "kueue.x-k8s.io/priority-class"},
		{"envFrom without a source", "framework: torch\ntrainer: {" + f + "}\npod: {envFrom: [{prefix: A_}]}", "pod.envFrom[0]", "secretRef"},
		{"envFrom on a container command", "trainer: {kind: CustomTrainerContainer, image: ghcr.io/me/t:1, command: [python, t.py]}\npod: {envFrom: [{secretRef: {name: s}}]}", "pod.envFrom", "bash -c"},
		{"a step of another kind", "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nframework: torch\ntrainer: {" + f + "}", "kind", "must be TrainStep"},
		{"namePrefix too long", "framework: torch\ntrainer: {" + f + "}\nnamePrefix: a-very-long-name-prefix", "namePrefix", "at most 20 characters"},
		{"secretRef object with a foreign key", "framework: torchtune\ntrainer: {}\ninitializer: {model: {storageUri: 'hf://m', secretRef: {name: s, key: k}}}", "initializer.model.secretRef.key", "unknown field"},
		{"torchtune LoRA module", "framework: torchtune\ntrainer: {peftConfig: {loraAttnModules: [gate_proj]}}", "trainer.peftConfig.loraAttnModules[0]", "q_proj"},
		{"torchtune key set twice", "framework: torchtune\ntrainer: {epochs: 1, config: {epochs: 2}}", "trainer.config[epochs]", "set it in one place"},
		{"duplicate key", "framework: torch\nframework: jax\ntrainer: {" + f + "}", "", "already set"},
		{"not YAML", "framework: [torch\n", "", "not valid YAML"},
	}
	require.GreaterOrEqual(t, len(cases), 40)
	dir := t.TempDir()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".yaml")
			require.NoError(t, os.WriteFile(file, []byte(tc.step), 0o644))
			var stdout, stderr bytes.Buffer
			code := cli.Main(t.Context(), []string{"run", "-f", file, "--kubeconfig", env.Kubeconfig, "-n", ns}, nil, &stdout, &stderr)
			assert.Equal(t, cli.ExitInvalid, code, stderr.String())
			msg := stderr.String()
			if tc.field != "" {
				assert.Contains(t, msg, tc.field+": ", "the error names the field")
			}
			assert.Contains(t, msg, tc.hint, "the error says what is wrong or how to fix it")
			assert.Contains(t, msg, "nothing was created")
		})
	}
	assert.Empty(t, testenv.TrainJobs(t.Context(), t, env.Client, ns), "no bad step may create a TrainJob")
}
