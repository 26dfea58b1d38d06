// Package version says which trainstep this is and which APIs it was built against: the release
// and commit the Makefile links in, and the Trainer, Argo and Tekton versions from the binary's
// own build information. `executor version` prints it; the image builder (internal/image) reads
// the same from the built binary and writes it as the image's OCI labels.
package version

import (
	"debug/buildinfo"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/trainstep/trainstep/plugin/tekton/api/v1beta1"
)

// The release and commit, set at link time by `make build` and the image builder:
//
//	-ldflags "-X github.com/trainstep/trainstep/internal/version.version=v0.3.0 -X ….commit=<sha>"
//
// GOFLAGS carries -buildvcs=false (the test bed builds from module zips and copies without .git),
// so the Go toolchain does not stamp the commit itself. They are variables only because -X can
// set nothing else; nothing assigns them at run time.
var (
	version = "dev"
	commit  = "unknown"
)

// Modules whose pinned versions say which APIs the binary speaks.
const (
	TrainerModule = "github.com/kubeflow/trainer/v2"
	ArgoModule    = "github.com/argoproj/argo-workflows/v3"
)

// LDFlags are the -ldflags -X arguments that stamp release and commit into a build of cmd/executor.
func LDFlags(release, rev string) string {
	return fmt.Sprintf("-X github.com/trainstep/trainstep/internal/version.version=%s -X github.com/trainstep/trainstep/internal/version.commit=%s", release, rev)
}

// Info is what a build of the executor is.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform,omitempty"`
	// Trainer is the kubeflow/trainer module whose trainer.kubeflow.org/v1alpha1 types are linked.
	Trainer string `json:"trainer"`
	// Argo is the argo-workflows module whose executor-plugin types are linked.
	Argo string `json:"argo"`
	// Tekton is the Tekton release whose tekton.dev/v1beta1 CustomRun JSON the face's own copy
	// is proven against (Tekton is not linked: plugin/tekton/api/v1beta1).
	Tekton string `json:"tekton"`
}

// Get is the running binary's Info.
func Get() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		// Only a binary built without module support has none; say so rather than guess.
		return Info{Version: version, Commit: commit, Trainer: "unknown", Argo: "unknown", Tekton: v1beta1.TektonRelease}
	}
	return fromBuildInfo(bi, version, commit)
}

// Read is the Info of the executor binary at path (of any platform), with the release and commit
// that the caller linked into it (the build information does not carry -X values apart).
func Read(path, release, rev string) (Info, error) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return Info{}, fmt.Errorf("reading the build information of %s: %w", path, err)
	}
	return fromBuildInfo(bi, release, rev), nil
}

func fromBuildInfo(bi *debug.BuildInfo, release, rev string) Info {
	info := Info{Version: release, Commit: rev, GoVersion: bi.GoVersion, Trainer: "unknown", Argo: "unknown", Tekton: v1beta1.TektonRelease}
	var goos, goarch string
	for _, s := range bi.Settings {
		switch s.Key {
		case "GOOS":
			goos = s.Value
		case "GOARCH":
			goarch = s.Value
		}
	}
	if goos != "" {
		info.Platform = goos + "/" + goarch
	}
	for _, d := range bi.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		switch d.Path {
		case TrainerModule:
			info.Trainer = d.Version
		case ArgoModule:
			info.Argo = d.Version
		}
	}
	return info
}

// Write prints info for a person, one line each.
func (i Info) Write(w io.Writer) error {
	_, err := fmt.Fprintf(w, `version:   %s
commit:    %s
go:        %s
platform:  %s
trainer:   %s (trainer.kubeflow.org/v1alpha1 TrainJob, %s)
argo:      %s (argoproj.io/v1alpha1 executor plugin, %s)
tekton:    %s (tekton.dev/v1beta1 CustomRun, types proven against github.com/tektoncd/pipeline)
`, i.Version, i.Commit, i.GoVersion, i.Platform, i.Trainer, TrainerModule, i.Argo, ArgoModule, i.Tekton)
	return err
}
