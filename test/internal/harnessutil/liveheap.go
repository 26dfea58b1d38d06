package harnessutil

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// LiveHeapBytes is the heap a process holds live, read from its /debug/pprof at addr (a
// controller's --pprof-bind-address) after a collection (?gc=1): the MemStats HeapAlloc line of
// the text heap profile. Unlike go_memstats_heap_inuse_bytes it leaves out garbage not yet
// collected, which with GOGC=100 can be as much again as what is live and varies with where in
// its cycle the collector is when it is read.
func LiveHeapBytes(ctx context.Context, addr string) (uint64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/heap?debug=1&gc=1", http.NoBody)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("reading the heap profile at %s: %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("reading the heap profile at %s: %s", addr, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 1<<20), 1<<24)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "# HeapAlloc = "); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("reading the heap profile at %s: %w", addr, err)
	}
	return 0, fmt.Errorf("the heap profile at %s has no HeapAlloc line", addr)
}
