package trainjob

import (
	"maps"
	"strconv"
)

// Output names of a step with a cache block (docs/cache.md), written after the resume outputs.
// A step without one writes none of them.
const (
	// OutCacheKey is the step's cache key: the name of its entry ends with its first 40
	// characters (kubectl get configmap -l trainstep.dev/cache-key=<them>).
	OutCacheKey = "cache-key"
	// OutCacheHit is "true" when the step was served from the cache, else "false".
	OutCacheHit = "cache-hit"
	// OutCachedFrom is the TrainJob whose outputs a hit returned; empty on a miss.
	OutCachedFrom = "cached-from"
)

// CacheOutputNames lists the cache outputs, in their stable order.
var CacheOutputNames = []string{OutCacheKey, OutCacheHit, OutCachedFrom}

// Cached is a step served from the cache: the outputs the TrainJob From's step wrote, returned
// as they were stored; or, with no Outputs, a step that followed the TrainJob From another step
// of its key made while it trained, whose outputs are that job's own.
type Cached struct {
	From    string
	Outputs map[string]string
}

// cacheOutputs adds the cache outputs of a step with a cache key; a hit's outputs are the stored
// ones, byte for byte, and only these are added to them.
func (o Observation) cacheOutputs(out map[string]string) map[string]string {
	if o.CacheKey == "" {
		return out
	}
	from := ""
	if o.Cached != nil {
		if o.Cached.Outputs != nil {
			out = maps.Clone(o.Cached.Outputs)
		}
		from = o.Cached.From
	}
	out[OutCacheKey] = o.CacheKey
	out[OutCacheHit] = strconv.FormatBool(o.Cached != nil)
	out[OutCachedFrom] = from
	return out
}
