package version

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFromBuildInfo(t *testing.T) {
	for _, tc := range []struct {
		name string
		bi   debug.BuildInfo
		want Info
	}{{
		name: "the pinned modules",
		bi: debug.BuildInfo{GoVersion: "go1.26.8", Settings: []debug.BuildSetting{{Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "arm64"}},
			Deps: []*debug.Module{{Path: TrainerModule, Version: "v2.3.0"}, {Path: ArgoModule, Version: "v3.7.3"}}},
		want: Info{Version: "v1", Commit: "c", GoVersion: "go1.26.8", Platform: "linux/arm64", Trainer: "v2.3.0", Argo: "v3.7.3", Tekton: "v1.3.0"},
	}, {
		name: "a replaced module reports its replacement",
		bi:   debug.BuildInfo{GoVersion: "go1.26.8", Deps: []*debug.Module{{Path: TrainerModule, Version: "v2.3.0", Replace: &debug.Module{Path: TrainerModule, Version: "v2.3.1"}}}},
		want: Info{Version: "v1", Commit: "c", GoVersion: "go1.26.8", Trainer: "v2.3.1", Argo: "unknown", Tekton: "v1.3.0"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, fromBuildInfo(&tc.bi, "v1", "c"))
		})
	}
}
