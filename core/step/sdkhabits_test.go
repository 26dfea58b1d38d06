package step

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A step written the way a Kubeflow SDK user thinks either means what they meant or is refused
// with the field and what to write instead; nothing is decoded into something else.
func TestSDKHabits(t *testing.T) {
	const tail = "trainer: {func: 'def f(): pass'}\n"
	cases := map[string]struct {
		doc         string
		wantRuntime *RuntimeRef // when the step is accepted
		wantErr     []string    // substrings of the one error, when it is refused
	}{
		"runtime as a name, as train(runtime=...) takes it": {
			doc: "framework: torch\nruntime: torch-distributed\n" + tail, wantRuntime: &RuntimeRef{Name: "torch-distributed"}},
		"runtime as the object": {
			doc: "framework: torch\nruntime: {name: torch-distributed, kind: ClusterTrainingRuntime}\n" + tail, wantRuntime: &RuntimeRef{Name: "torch-distributed", Kind: ClusterTrainingRuntime}},
		"runtime name checked as the object's is": {
			doc: "framework: torch\nruntime: Torch_Distributed\n" + tail, wantErr: []string{`runtime.name: Invalid value: "Torch_Distributed"`, "RFC 1123"}},
		"runtime an empty name": {
			doc: "framework: torch\nruntime: ''\n" + tail, wantErr: []string{"runtime.name: Required value"}},
		"runtime a number": {
			doc: "framework: torch\nruntime: 3\n" + tail, wantErr: []string{"runtime: Invalid value: 3: must be a runtime's name, or {name: <runtime's name>, kind: …}"}},
		"runtime object with an unknown key": {
			doc: "framework: torch\nruntime: {nam: torch-distributed}\n" + tail, wantErr: []string{"runtime.nam", `did you mean "name"?`}},
		"framework pytorch": {
			doc: "framework: pytorch\n" + tail, wantErr: []string{`framework: Invalid value: "pytorch"`, "write framework: torch"}},
		"framework PyTorch": {
			doc: "framework: PyTorch\n" + tail, wantErr: []string{`framework: Invalid value: "PyTorch"`, "write framework: torch"}},
		"initializer.model.accessToken": {
			doc:     "framework: torchtune\ntrainer: {}\ninitializer: {model: {storageUri: 'hf://m', accessToken: hf_abc}}\n",
			wantErr: []string{"initializer.model.accessToken", "ACCESS_TOKEN", "secretRef: hf-token"}},
		"initializer.dataset.access_token": {
			doc:     "framework: torchtune\ntrainer: {}\ninitializer: {dataset: {storageUri: 'hf://d', access_token: hf_abc}}\n",
			wantErr: []string{"initializer.dataset.access_token", "secretRef: hf-token"}},
		"initializer S3 keys": {
			doc:     "framework: torchtune\ntrainer: {}\ninitializer: {dataset: {storageUri: 's3://b/d', secretAccessKey: abc}}\n",
			wantErr: []string{"initializer.dataset.secretAccessKey", "SECRET_ACCESS_KEY", "secretRef"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := Parse([]byte(tc.doc))
			if err == nil {
				err = Invalid(s.Validate())
			}
			if tc.wantErr != nil {
				require.Error(t, err)
				var ie *InvalidError
				require.ErrorAs(t, err, &ie)
				require.Len(t, ie.Errs, 1, "one problem, said once: %v", err)
				for _, want := range tc.wantErr {
					assert.Contains(t, err.Error(), want)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.wantRuntime, s.Runtime)
			// Both spellings are the same step: the same JSON, so the same identity and cache key.
			b, err := json.Marshal(s.Runtime)
			require.NoError(t, err)
			want, _ := json.Marshal(struct {
				Name string `json:"name"`
				Kind string `json:"kind,omitempty"`
			}{tc.wantRuntime.Name, tc.wantRuntime.Kind})
			assert.JSONEq(t, string(want), string(b))
		})
	}
}
