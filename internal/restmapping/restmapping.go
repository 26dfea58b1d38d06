// Package restmapping keeps the REST mappings a long-running face has found, so that reading its
// informer cache does not ask the RESTMapper again on every Get and List.
//
// controller-runtime's cache for a set of namespaces (cache.Options.DefaultNamespaces) asks the
// RESTMapper whether an object is namespaced on every Get and List. Its dynamic mapper answers
// through a PriorityRESTMapper that builds a NoMatch error for every group version that is not
// the one asked for: about 25 KB of garbage per status call in the Argo sidecar, more than half of
// what such a call allocates, and the collector work that puts tens of milliseconds in its tail.
package restmapping

import (
	"net/http"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Memo is a RESTMapper that remembers every mapping its delegate found. A miss (an error) is not
// remembered: the delegate rediscovers on a miss, so a CRD installed later is still found. The
// kinds a face reads keep their resource and scope for its life; a CRD that changes its scope
// under a running process is not followed until the process restarts.
type Memo struct {
	meta.RESTMapper
	mu    sync.RWMutex
	found map[memoKey]meta.RESTMapping
}

type memoKey struct {
	gk       schema.GroupKind
	versions string
}

// Memoize wraps m.
func Memoize(m meta.RESTMapper) *Memo {
	return &Memo{RESTMapper: m, found: map[memoKey]meta.RESTMapping{}}
}

// NewDynamic is controller-runtime's default mapper (discovery, lazily per group) memoized: the
// manager's MapperProvider, and the Mapper of a cache or client built without a manager.
func NewDynamic(cfg *rest.Config, httpClient *http.Client) (meta.RESTMapper, error) {
	m, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return Memoize(m), nil
}

// RESTMapping returns the mapping for gk at the first of versions that has one, asking the
// delegate only the first time. Each caller gets its own copy.
func (m *Memo) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	k := memoKey{gk: gk, versions: strings.Join(versions, ",")}
	m.mu.RLock()
	got, ok := m.found[k]
	m.mu.RUnlock()
	if ok {
		return &got, nil
	}
	found, err := m.RESTMapper.RESTMapping(gk, versions...)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.found[k] = *found
	m.mu.Unlock()
	return found, nil
}
