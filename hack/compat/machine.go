package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// rowResult is what one run of one row proved, as kept in docs/compatibility.json.
type rowResult struct {
	ID      string `json:"id"`
	System  string `json:"system"`
	Version string `json:"version"`
	// Date (UTC) and Commit of the run, and the Machine it ran on.
	Date    string  `json:"date"`
	Commit  string  `json:"commit"`
	Machine machine `json:"machine"`
	// Status is pass, fail (a test failed) or error (the assets or the suite could not run:
	// Reason says why).
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	// BuildSeconds is how long ensuring the assets took; BuildCached says they were already
	// there (so it is not a cold build's cost).
	BuildSeconds int          `json:"build_seconds"`
	BuildCached  bool         `json:"build_cached"`
	TestSeconds  int          `json:"test_seconds"`
	Faces        []faceResult `json:"faces,omitempty"`
}

// machine is what the figures were measured on.
type machine struct {
	CPUs      int    `json:"cpus"`
	MemoryGiB int    `json:"memory_gib"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
}

func (m machine) String() string {
	return fmt.Sprintf("%d CPUs, %d GiB, %s %s", m.CPUs, m.MemoryGiB, m.OS, m.Arch)
}

func thisMachine() machine {
	return machine{CPUs: runtime.NumCPU(), MemoryGiB: memoryGiB(), OS: osName(), Arch: runtime.GOARCH}
}

// memoryGiB is MemTotal from /proc/meminfo, rounded; 0 where there is none.
func memoryGiB() int {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kib, err := strconv.Atoi(fields[1])
			if err != nil {
				return 0
			}
			return (kib + 512*1024) / (1024 * 1024)
		}
	}
	return 0
}

// osName is PRETTY_NAME from /etc/os-release, else GOOS.
func osName() string {
	b, err := os.ReadFile("/etc/os-release")
	if err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "PRETTY_NAME="); ok {
				return strings.Trim(v, `"`)
			}
		}
	}
	return runtime.GOOS
}
