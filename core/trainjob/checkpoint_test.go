package trainjob

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/core/runtimes/stock"
	"github.com/trainstep/trainstep/core/step"
	"github.com/trainstep/trainstep/core/trainers"
)

const checkpointVolume = `
pod:
  volumes: [{name: ckpt, persistentVolumeClaim: {claimName: runs}}]
  volumeMounts: [{name: ckpt, mountPath: /mnt/ckpt}]
`

// The checkpoint block reaches the trainer container as env, on every framework's TrainJob: the
// same location for every attempt of the step (a retry is a new TrainJob that must find the same
// place), and the attempt.
func TestCheckpointBlockBecomesTrainerEnv(t *testing.T) {
	fn := "trainer: {func: \"def train():\\n    pass\\n\"}\n"
	cases := map[string]struct {
		step    string
		want    map[string]string // checkpoint env names → values; nil: none of them
		wantErr string
	}{
		"torch, volume": {step: "framework: torch\n" + fn + checkpointVolume + "checkpoint: {volume: ckpt}\n",
			want: map[string]string{step.CheckpointDirEnv: "/mnt/ckpt/checkpoints/u/k"}},
		"deepspeed (MPI launcher), volume and path": {step: "framework: deepspeed\n" + fn + checkpointVolume + "checkpoint: {volume: ckpt, path: llama/run1}\n",
			want: map[string]string{step.CheckpointDirEnv: "/mnt/ckpt/llama/run1"}},
		"xgboost, uri": {step: "framework: xgboost\n" + fn + "checkpoint: {uri: 's3://bucket/runs/x'}\n",
			want: map[string]string{step.CheckpointURIEnv: "s3://bucket/runs/x"}},
		"container trainer, volume": {step: "framework: torch\ntrainer: {kind: CustomTrainerContainer, image: img, command: [python, train.py]}\n" + checkpointVolume + "checkpoint: {volume: ckpt}\n",
			want: map[string]string{step.CheckpointDirEnv: "/mnt/ckpt/checkpoints/u/k"}},
		"no block":                   {step: "framework: torch\n" + fn + checkpointVolume},
		"user env without the block": {step: "framework: torch\ntrainer: {func: \"def train():\\n    pass\\n\", env: {TRAINSTEP_CHECKPOINT_DIR: /tmp/mine}}\n"},
		"user env clashes with the block": {step: "framework: torch\ntrainer: {func: \"def train():\\n    pass\\n\", env: {TRAINSTEP_CHECKPOINT_DIR: /tmp/mine}}\n" + checkpointVolume + "checkpoint: {volume: ckpt}\n",
			wantErr: "checkpoint: Invalid value: \"TRAINSTEP_CHECKPOINT_DIR\": sets TRAINSTEP_CHECKPOINT_DIR, which trainer.env, runtimeConfig.env or pod.env also sets"},
		"user's attempt clashes with the block": {step: "framework: torch\ntrainer: {func: \"def train():\\n    pass\\n\", env: {TRAINSTEP_ATTEMPT: '7'}}\n" + checkpointVolume + "checkpoint: {volume: ckpt}\n",
			wantErr: "sets TRAINSTEP_ATTEMPT, which trainer.env, runtimeConfig.env or pod.env also sets"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := step.Parse([]byte(tc.step))
			require.NoError(t, err)
			p, err := (&Planner{Trainers: trainers.Builtin(), Runtimes: stock.Source{}}).Plan(t.Context(), s, "team")
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.True(t, step.IsInvalid(err))
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			var envs [][]corev1.EnvVar
			for attempt := range 2 {
				tj := p.TrainJob(Identity{Engine: "test", OwnerUID: "u", StepKey: "k", Attempt: attempt})
				envs = append(envs, tj.Spec.Trainer.Env)
				got := map[string]string{}
				var attemptEnv []string
				for _, e := range tj.Spec.Trainer.Env {
					switch e.Name {
					case step.CheckpointDirEnv, step.CheckpointURIEnv:
						got[e.Name] = e.Value
					case step.AttemptEnv:
						attemptEnv = append(attemptEnv, e.Value)
					}
				}
				if tc.want == nil {
					assert.Empty(t, attemptEnv, "no attempt env without the block")
					assert.NotContains(t, got, step.CheckpointURIEnv)
					if v, ok := got[step.CheckpointDirEnv]; ok {
						assert.Equal(t, "/tmp/mine", v, "the user's own value, untouched")
					}
					continue
				}
				assert.Equal(t, tc.want, got)
				assert.Equal(t, []string{strconv.Itoa(attempt)}, attemptEnv)
			}
			if tc.want == nil {
				assert.Equal(t, envs[0], envs[1], "every attempt gets the same env")
				return
			}
			last := len(envs[0]) - 1
			assert.Equal(t, envs[0][:last], envs[1][:last], "every attempt gets the same env but its attempt")
		})
	}
}
