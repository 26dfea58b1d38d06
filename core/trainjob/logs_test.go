package trainjob

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestKubeletLogsLimitsBytes(t *testing.T) {
	kube := fake.NewClientset()
	var opts *corev1.PodLogOptions
	kube.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "log" {
			opts = a.(k8stesting.GenericAction).GetValue().(*corev1.PodLogOptions)
		}
		return false, nil, nil
	})
	_, err := KubeletLogs{Client: kube}.Tail(t.Context(), "ns", "pod", NodeContainer, TailLines)
	require.NoError(t, err)
	require.NotNil(t, opts)
	require.NotNil(t, opts.LimitBytes, "an unbounded read can pull megabytes of one long line")
	assert.Equal(t, int64(TailReadBytes), *opts.LimitBytes)
	assert.Equal(t, int64(TailLines), *opts.TailLines)
}

func TestWithLogTailIsBounded(t *testing.T) {
	long := strings.Repeat("x", 3*TailBytes)
	var many []string
	for i := range 200 {
		many = append(many, fmt.Sprintf("line %d", i))
	}
	cases := map[string]struct {
		tail     string
		wantEnd  string
		wantCut  bool
		maxLines int
	}{
		"short":            {tail: "a\nb\nerror: boom\n", wantEnd: "error: boom"},
		"many lines":       {tail: strings.Join(many, "\n"), wantEnd: "line 199", wantCut: true},
		"one huge line":    {tail: "start\n" + long + "END", wantEnd: "END", wantCut: true},
		"huge utf-8 lines": {tail: strings.Repeat("训练失败 ", TailBytes) + "\nlast", wantEnd: "last", wantCut: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obs := Observation{Message: "TrainJob x failed"}.WithLogTail("pod-0", NodeContainer, tc.tail)
			assert.LessOrEqual(t, len(obs.LogTail), TailBytes)
			assert.LessOrEqual(t, strings.Count(obs.LogTail, "\n")+1, TailLines)
			assert.True(t, strings.HasSuffix(obs.LogTail, tc.wantEnd), "the end of the log explains the failure: %q", obs.LogTail)
			assert.Equal(t, tc.wantCut, strings.HasPrefix(obs.LogTail, TailCut), "a cut tail says so: %q", obs.LogTail)
			assert.True(t, strings.ToValidUTF8(obs.LogTail, "?") == obs.LogTail, "cut on a rune boundary")
			assert.LessOrEqual(t, len(obs.Message), len("TrainJob x failed")+len("\nlast lines of pod-0:\n")+TailBytes)
			assert.Equal(t, obs.Message, obs.Outputs()[OutMessage])
		})
	}
}
