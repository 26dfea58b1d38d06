package trainjob

import (
	"testing"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// DeleteUnlessKept leaves a kept job and deletes one that is not.
func TestDeleteUnlessKept(t *testing.T) {
	scheme, err := NewScheme()
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		annotations map[string]string
		deleted     bool
	}{
		"kept: left alone":  {annotations: map[string]string{AnnotationKept: "the step's timeout passed; keepOnTimeout"}},
		"not kept: deleted": {deleted: true},
	} {
		t.Run(name, func(t *testing.T) {
			job := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns", Annotations: tc.annotations}}
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(job).Build()
			read := &trainer.TrainJob{}
			require.NoError(t, c.Get(t.Context(), client.ObjectKeyFromObject(job), read))
			deleted, err := DeleteUnlessKept(t.Context(), c, read)
			require.NoError(t, err)
			assert.Equal(t, tc.deleted, deleted)
			err = c.Get(t.Context(), client.ObjectKeyFromObject(job), &trainer.TrainJob{})
			assert.Equal(t, tc.deleted, apierrors.IsNotFound(err))
		})
	}
}
