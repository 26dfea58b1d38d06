package main

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/trainstep/trainstep/internal/compat"
)

func thisMachine() compat.Machine {
	return compat.Machine{CPUs: runtime.NumCPU(), MemoryGiB: memoryGiB(), OS: osName(), Arch: runtime.GOARCH}
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
