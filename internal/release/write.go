package release

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/trainstep/trainstep/internal/image"
)

// Options say what to release.
type Options struct {
	image.Options
	// Repository is where the image is pushed, e.g. ghcr.io/trainstep/trainstep.
	Repository string
	// Out is the directory written (dist).
	Out string
}

// Result is what Write put in Out.
type Result struct {
	// Image is repository@digest, as the install files name it.
	Image string
	// Installs are the install files by face.
	Installs map[string]string
	// Chart is the chart, stamped with the release and packaged (trainstep-<version>.tgz).
	Chart string
	// Checksums is the SHA256SUMS file.
	Checksums string
}

// Write builds the image, writes it (Out/image: OCI layout, docker tarballs tagged
// repository:version), the install file of each face pinned to its digest, and SHA256SUMS over
// the files a user downloads.
func Write(ctx context.Context, opts Options) (Result, error) {
	idx, err := image.Build(ctx, opts.Options)
	if err != nil {
		return Result{}, err
	}
	w, err := image.Write(filepath.Join(opts.Out, "image"), idx, opts.Repository+":"+opts.Version)
	if err != nil {
		return Result{}, err
	}
	r := Result{Image: opts.Repository + "@" + w.Digest.String(), Installs: map[string]string{}}
	files := []string{}
	for _, face := range Faces {
		b, err := Render(opts.Root, face, r.Image)
		if err != nil {
			return Result{}, err
		}
		f := filepath.Join(opts.Out, "install-"+face+".yaml")
		if err := os.WriteFile(f, b, 0o644); err != nil {
			return Result{}, err
		}
		r.Installs[face] = f
		files = append(files, f)
	}
	name, tgz, err := Chart(opts.Root, opts.Version, r.Image, opts.Created)
	if err != nil {
		return Result{}, err
	}
	r.Chart = filepath.Join(opts.Out, name)
	if err := os.WriteFile(r.Chart, tgz, 0o644); err != nil {
		return Result{}, err
	}
	files = append(files, r.Chart)
	for _, f := range w.Tarballs {
		files = append(files, f)
	}
	r.Checksums = filepath.Join(opts.Out, "SHA256SUMS")
	return r, writeChecksums(opts.Out, r.Checksums, files)
}

// writeChecksums writes `sha256sum -c`'s format, paths relative to dir, sorted.
func writeChecksums(dir, out string, files []string) error {
	var lines []string
	for _, f := range files {
		sum, err := fileSHA256(f)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, f)
		if err != nil {
			return err
		}
		lines = append(lines, sum+"  "+filepath.ToSlash(rel))
	}
	sort.Strings(lines)
	return os.WriteFile(out, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hashing %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
