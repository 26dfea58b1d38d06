package argo_test

import (
	"net/http"
	"sync/atomic"

	"k8s.io/client-go/rest"
)

// countingConfig is env.Config with every request the client makes counted in n: the API
// requests of a plugin started on it (startPluginWith), watches and lists included.
func countingConfig(n *atomic.Int64) *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			n.Add(1)
			return rt.RoundTrip(r)
		})
	})
	return cfg
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
