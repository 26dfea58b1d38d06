package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// ChartDir is the chart under the repository's root.
const ChartDir = "charts/trainstep"

// Chart stamps the chart for a release and packages it as `helm package` does
// (trainstep-<version>.tgz, every file under trainstep/): its version is the release's (without
// the v: Helm's versions are SemVer), its appVersion the release's tag, and its default image
// the release's, pinned by digest (image is repository@sha256:…), so that `helm install` of the
// package runs what the install files run. modTime stamps every entry: a release is the same
// bytes each time it is built from one commit.
func Chart(root, version, image string, modTime time.Time) (name string, tgz []byte, err error) {
	repository, digest, ok := strings.Cut(image, "@")
	if !ok {
		return "", nil, fmt.Errorf("image %q: a release pins the image by digest (repository@sha256:…)", image)
	}
	dir := filepath.Join(root, ChartDir)
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	gz.ModTime = modTime
	tw := tar.NewWriter(gz)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		switch filepath.ToSlash(rel) {
		case "Chart.yaml":
			b, err = stampChart(b, version, image)
		case "values.yaml":
			b, err = stampValues(b, repository, digest)
		}
		if err != nil {
			return fmt.Errorf("%s/%s: %w", ChartDir, rel, err)
		}
		hdr := &tar.Header{Name: "trainstep/" + filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(b)), ModTime: modTime, Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if err != nil {
		return "", nil, fmt.Errorf("packaging the chart: %w", err)
	}
	if err := tw.Close(); err != nil {
		return "", nil, err
	}
	if err := gz.Close(); err != nil {
		return "", nil, err
	}
	return "trainstep-" + strings.TrimPrefix(version, "v") + ".tgz", buf.Bytes(), nil
}

// replaceLine replaces the one line re matches in b with line, and fails when re matches none
// or several: the chart's layout changed under the release.
func replaceLine(b []byte, re *regexp.Regexp, line string) ([]byte, error) {
	if n := len(re.FindAll(b, -1)); n != 1 {
		return nil, fmt.Errorf("expected one line matching %s, found %d", re, n)
	}
	return re.ReplaceAllLiteral(b, []byte(line)), nil
}

var (
	chartVersion    = regexp.MustCompile(`(?m)^version: .*$`)
	chartAppVersion = regexp.MustCompile(`(?m)^appVersion: .*$`)
	chartImages     = regexp.MustCompile(`(?m)^ {6}image: trainstep:dev$`)
	valuesRepo      = regexp.MustCompile(`(?m)^ {2}repository: trainstep$`)
	valuesDigest    = regexp.MustCompile(`(?m)^ {2}digest: ""$`)
)

func stampChart(b []byte, version, image string) ([]byte, error) {
	b, err := replaceLine(b, chartVersion, "version: "+strings.TrimPrefix(version, "v"))
	if err != nil {
		return nil, err
	}
	if b, err = replaceLine(b, chartAppVersion, "appVersion: "+version); err != nil {
		return nil, err
	}
	return replaceLine(b, chartImages, "      image: "+image)
}

func stampValues(b []byte, repository, digest string) ([]byte, error) {
	b, err := replaceLine(b, valuesRepo, "  repository: "+repository)
	if err != nil {
		return nil, err
	}
	return replaceLine(b, valuesDigest, "  digest: "+digest)
}
