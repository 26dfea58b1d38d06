package trainjob

import (
	"fmt"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// NewScheme is the API scheme every face and test client uses: Kubernetes' built-in types, the
// Trainer's, and whatever the face adds (Argo's Workflow, Tekton's CustomRun).
func NewScheme(extra ...func(*runtime.Scheme) error) (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range append([]func(*runtime.Scheme) error{clientgoscheme.AddToScheme, trainer.AddToScheme}, extra...) {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("building the API scheme: %w", err)
		}
	}
	return s, nil
}
