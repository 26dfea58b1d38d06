// Command release writes a release into --out (`make release VERSION=…`): the image (OCI layout
// and docker tarballs), install-argo.yaml and install-tekton.yaml with the image pinned by
// digest, and SHA256SUMS. internal/release says how the install files are made.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"time"

	"github.com/trainstep/trainstep/internal/image"
	"github.com/trainstep/trainstep/internal/release"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	out := fs.String("out", "dist", "the directory written")
	repo := fs.String("repository", "ghcr.io/trainstep/trainstep", "where the image is pushed; the install files name repository@digest")
	rel := fs.String("version", "", "the release, e.g. v0.3.0 (required)")
	rev := fs.String("commit", "unknown", "the commit stamped into the binary and the labels")
	created := fs.Int64("created", 0, "the Unix time of every file in the image: the commit's (git log -1 --format=%ct)")
	source := fs.String("source", "https://github.com/trainstep/trainstep", "org.opencontainers.image.source")
	platforms := fs.String("platforms", strings.Join(image.DefaultPlatforms, ","), "comma-separated os/arch")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *rel == "" {
		return fmt.Errorf("--version is required: make release VERSION=v0.3.0")
	}
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	r, err := release.Write(ctx, release.Options{Repository: *repo, Out: *out, Options: image.Options{
		Root: root, Version: *rel, Commit: *rev, Created: time.Unix(*created, 0).UTC(), Source: *source,
		Platforms: strings.Split(*platforms, ","),
	}})
	if err != nil {
		return err
	}
	fmt.Printf("image %s\n", r.Image)
	faces := make([]string, 0, len(r.Installs))
	for f := range r.Installs {
		faces = append(faces, f)
	}
	sort.Strings(faces)
	for _, f := range faces {
		fmt.Printf("  %s: kubectl apply -f %s\n", f, r.Installs[f])
	}
	fmt.Printf("  checksums: %s\n", r.Checksums)
	return nil
}
