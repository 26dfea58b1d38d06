package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

const trainerModule = "github.com/kubeflow/trainer/v2"

// trainerDirs caches module directories per Trainer version: `go mod download` costs about a
// second even when the module is cached, and several suites may start envs in one process.
var trainerDirs = struct {
	sync.Mutex
	byVersion map[string]string
}{byVersion: map[string]string{}}

// trainerModuleDir returns the Go module cache directory of the Trainer module at version,
// downloading it from the module proxy if needed. Any served version works, also one that
// go.mod does not require, so a test can install the CRDs of an older Trainer release.
func trainerModuleDir(ctx context.Context, version string) (string, error) {
	trainerDirs.Lock()
	defer trainerDirs.Unlock()
	if dir, ok := trainerDirs.byVersion[version]; ok {
		return dir, nil
	}
	dir, err := goModDownload(ctx, trainerModule+"@"+version)
	if err != nil {
		return "", err
	}
	trainerDirs.byVersion[version] = dir
	return dir, nil
}

// goModDownload runs `go mod download -json mod@version` and returns the module's directory.
func goModDownload(ctx context.Context, modVersion string) (string, error) {
	// Run outside the main module, so that downloading a version go.mod does not require can
	// never touch go.mod or go.sum (other packages' tests may run at the same time).
	work, err := os.MkdirTemp("", "trainstep-gomod-")
	if err != nil {
		return "", fmt.Errorf("creating a directory to run go mod download in: %w", err)
	}
	defer os.RemoveAll(work)

	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", modVersion)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "GOWORK=off", "GO111MODULE=on")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()

	// On failure go still prints the JSON, with the reason in "Error".
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(stdout.Bytes(), &mod); err != nil {
		if runErr != nil {
			return "", fmt.Errorf("go mod download %s: %w: %s", modVersion, runErr, bytes.TrimSpace(stderr.Bytes()))
		}
		return "", fmt.Errorf("reading the output of go mod download %s: %w", modVersion, err)
	}
	if mod.Error != "" {
		return "", fmt.Errorf("go mod download %s: %s", modVersion, mod.Error)
	}
	if runErr != nil {
		return "", fmt.Errorf("go mod download %s: %w: %s", modVersion, runErr, bytes.TrimSpace(stderr.Bytes()))
	}
	if mod.Dir == "" {
		return "", fmt.Errorf("go mod download %s reported no module directory", modVersion)
	}
	return filepath.Clean(mod.Dir), nil
}
