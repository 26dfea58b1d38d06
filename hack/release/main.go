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
	options := image.BuildFlags(fs, "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	opts, err := options()
	if err != nil {
		return err
	}
	if opts.Version == "" {
		return fmt.Errorf("--version is required: make release VERSION=v0.3.0")
	}
	r, err := release.Write(ctx, release.Options{Repository: *repo, Out: *out, Options: opts})
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
