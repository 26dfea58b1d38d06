package tekton

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func kubernetesClient(cfg *rest.Config) (kubernetes.Interface, error) {
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the client that reads pod logs: %w", err)
	}
	return c, nil
}
