package step

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

const checkpointPod = `framework: torch
trainer: {}
pod:
  volumes:
  - {name: ckpt, persistentVolumeClaim: {claimName: runs}}
  - {name: data, persistentVolumeClaim: {claimName: datasets}}
  - {name: creds, secret: {secretName: s3}}
  volumeMounts:
  - {name: ckpt, mountPath: /mnt/ckpt}
  - {name: data, mountPath: /data, readOnly: true}
  - {name: creds, mountPath: /creds}
`

func TestCheckpointBlock(t *testing.T) {
	cases := map[string]struct {
		block   string
		noPod   bool
		wantEnv []corev1.EnvVar
		wantErr []string // substrings of the one error
	}{
		"volume, a directory per step": {block: "{volume: ckpt}", wantEnv: []corev1.EnvVar{
			{Name: CheckpointDirEnv, Value: "/mnt/ckpt/checkpoints/0b7e-uid/wf-x7k2p.train_1-ee98db29"}, {Name: AttemptEnv, Value: "2"}}},
		"volume and path, the step's own": {block: "{volume: ckpt, path: runs/llama/}", wantEnv: []corev1.EnvVar{
			{Name: CheckpointDirEnv, Value: "/mnt/ckpt/runs/llama"}, {Name: AttemptEnv, Value: "2"}}},
		"uri, passed through": {block: "{uri: 's3://bucket/runs/llama'}", wantEnv: []corev1.EnvVar{
			{Name: CheckpointURIEnv, Value: "s3://bucket/runs/llama"}, {Name: AttemptEnv, Value: "2"}}},
		"empty": {block: "{}", wantErr: []string{"checkpoint: Required value", "volume: <a volume pod.volumeMounts mounts>"}},
		"both":  {block: "{volume: ckpt, uri: 's3://b/p'}", wantErr: []string{"checkpoint: Invalid value", "not both"}},
		"unknown volume lists the mounted ones": {block: "{volume: cache}",
			wantErr: []string{"checkpoint.volume", `"cache"`, "mounted: ckpt, data, creds"}},
		"no pod block":             {block: "{volume: ckpt}", noPod: true, wantErr: []string{"checkpoint.volume", "mounts no volume", "pod.volumeMounts"}},
		"read-only mount":          {block: "{volume: data}", wantErr: []string{"checkpoint.volume", "readOnly at /data"}},
		"secret volume":            {block: "{volume: creds}", wantErr: []string{"checkpoint.volume", "secret volume", "persistentVolumeClaim"}},
		"absolute path":            {block: "{volume: ckpt, path: /ckpt}", wantErr: []string{"checkpoint.path", "relative to the volume's mountPath"}},
		"path escaping the volume": {block: "{volume: ckpt, path: ../other}", wantErr: []string{"checkpoint.path", "no .."}},
		"dot-dot inside":           {block: "{volume: ckpt, path: a/../../b}", wantErr: []string{"checkpoint.path", "no .."}},
		"uri without a bucket":     {block: "{uri: s3://}", wantErr: []string{"checkpoint.uri", "s3://bucket/prefix"}},
		"a path as uri":            {block: "{uri: /mnt/ckpt}", wantErr: []string{"checkpoint.uri", "volume and path"}},
		"file uri":                 {block: "{uri: 'file://host/x'}", wantErr: []string{"checkpoint.uri", "does not outlive the pod"}},
		"path with uri":            {block: "{uri: 's3://b/p', path: x}", wantErr: []string{"checkpoint.path", "goes with volume"}},
		"unknown key":              {block: "{volumes: ckpt}", wantErr: []string{"checkpoint.volumes", `did you mean "volume"?`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			doc := checkpointPod
			if tc.noPod {
				doc = "framework: torch\ntrainer: {}\n"
			}
			s, err := Parse([]byte(doc + "checkpoint: " + tc.block + "\n"))
			if err == nil {
				err = Invalid(s.Validate())
			}
			if tc.wantErr == nil {
				require.NoError(t, err)
				assert.Equal(t, tc.wantEnv, s.Checkpoint.Env(s.Pod, StepPath("0b7e-uid", "wf-x7k2p.train[1]"), 2))
				return
			}
			require.Error(t, err)
			assert.True(t, IsInvalid(err))
			var invalid *InvalidError
			require.ErrorAs(t, err, &invalid)
			require.Len(t, invalid.Errs, 1, "%v", err)
			for _, w := range tc.wantErr {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestNoCheckpointBlockHasNoEnv(t *testing.T) {
	var c *Checkpoint
	assert.Nil(t, c.Env(nil, "u/k", 1))
	assert.Empty(t, c.Dir(nil, "u/k"))
	assert.Empty(t, c.Validate(nil, nil))
}

func TestStepPathIsOnePerOwnerAndStepKey(t *testing.T) {
	cases := []struct{ owner, key, want string }{
		{"0b7e-uid", "train", "0b7e-uid/train"},
		{"", "", "local/run"},
		{"u", "..", "u/-" + shortSum("..")},
		{"u", "a/b", "u/a_b-" + shortSum("a/b")},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, StepPath(tc.owner, tc.key), "owner %q key %q", tc.owner, tc.key)
	}
	assert.NotEqual(t, StepPath("u", "a/b"), StepPath("u", "a_b"), "keys made safe stay apart")
	assert.NotEqual(t, StepPath("u1", "k"), StepPath("u2", "k"), "a new run of the pipeline starts afresh")
}

func shortSum(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:4])
}
