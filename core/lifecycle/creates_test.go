package lifecycle

import (
	"testing"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestCreatesGoWhenTheCacheShowsTheJob(t *testing.T) {
	c := NewCreates()
	k := client.ObjectKey{Namespace: "ns", Name: "tj"}
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	c.add(k, at)
	got, ok := c.inFlight(k)
	assert.True(t, ok)
	assert.Equal(t, at, got)
	c.Seen("a tombstone") // not an object: ignored
	_, ok = c.inFlight(k)
	assert.True(t, ok)
	tj := &trainer.TrainJob{}
	tj.Namespace, tj.Name = "ns", "tj"
	c.Seen(tj)
	_, ok = c.inFlight(k)
	assert.False(t, ok)
	var none *Creates // a face that keeps no record
	none.add(k, at)
	_, ok = none.inFlight(k)
	assert.False(t, ok)
}
