package argoharness

import (
	"fmt"
	"os"
	"strings"
)

// Memory is a process's resident set from /proc/PID/status, in MB: Anon is its heap and stacks,
// File the pages of files it maps (mostly its own executable, which processes running the same
// file share in the page cache but each count in their RSS).
type Memory struct {
	RSS, Anon, File float64
}

// Add sums two processes' memory.
func (m Memory) Add(o Memory) Memory {
	return Memory{RSS: m.RSS + o.RSS, Anon: m.Anon + o.Anon, File: m.File + o.File}
}

// MemoryOf reads pid's resident set.
func MemoryOf(pid int) (Memory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Memory{}, err
	}
	var m Memory
	for _, line := range strings.Split(string(b), "\n") {
		for key, dst := range map[string]*float64{"VmRSS:": &m.RSS, "RssAnon:": &m.Anon, "RssFile:": &m.File} {
			if v, ok := strings.CutPrefix(line, key); ok {
				var kb float64
				if _, err := fmt.Sscanf(strings.TrimSpace(v), "%f kB", &kb); err == nil {
					*dst = kb / 1024
				}
			}
		}
	}
	return m, nil
}
