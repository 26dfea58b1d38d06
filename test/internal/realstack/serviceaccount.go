package realstack

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// ServiceAccountConfig returns a client config that authenticates as ServiceAccount ns/name with
// a bound token from the TokenRequest API, signed by the apiserver's service-account key: the
// way a pod's projected token authenticates, so RBAC (the apiserver runs Node,RBAC) sees exactly
// that ServiceAccount. The ServiceAccount must exist. The token is valid for expiry seconds
// (the apiserver's minimum is 600).
func (s *Stack) ServiceAccountConfig(ctx context.Context, ns, name string, expiry int64) (*rest.Config, error) {
	sa := &corev1.ServiceAccount{}
	sa.Namespace, sa.Name = ns, name
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(expiry)}}
	if err := s.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		return nil, fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", ns, name, err)
	}
	if tr.Status.Token == "" {
		return nil, fmt.Errorf("the TokenRequest for ServiceAccount %s/%s returned no token", ns, name)
	}
	return &rest.Config{
		Host:            s.Config.Host,
		TLSClientConfig: rest.TLSClientConfig{CAFile: s.Config.CAFile, CAData: s.Config.CAData},
		BearerToken:     tr.Status.Token,
		QPS:             s.Config.QPS, Burst: s.Config.Burst,
	}, nil
}
