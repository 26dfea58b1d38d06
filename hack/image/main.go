// Command image builds trainstep's multi-platform image with no container engine (`make image`):
// an OCI layout and one `docker load` tarball per platform in --out. internal/image says what is
// in it and why go-containerregistry builds it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/trainstep/trainstep/internal/image"
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
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	out := fs.String("out", "bin/image", "the directory written")
	ref := fs.String("image", "trainstep:dev", "the repository:tag the docker tarballs load as")
	release := fs.String("version", "dev", "the release stamped into the binary and the labels")
	rev := fs.String("commit", "unknown", "the commit stamped into the binary and the labels")
	created := fs.Int64("created", 0, "the Unix time of every file and of the config: the commit's (git log -1 --format=%ct)")
	source := fs.String("source", "https://github.com/trainstep/trainstep", "org.opencontainers.image.source")
	platforms := fs.String("platforms", strings.Join(image.DefaultPlatforms, ","), "comma-separated os/arch")
	if err := fs.Parse(args); err != nil {
		return err
	}
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	idx, err := image.Build(ctx, image.Options{Root: root, Version: *release, Commit: *rev, Created: time.Unix(*created, 0).UTC(),
		Source: *source, Platforms: strings.Split(*platforms, ",")})
	if err != nil {
		return err
	}
	w, err := image.Write(*out, idx, *ref)
	if err != nil {
		return err
	}
	fmt.Printf("%s@%s\n  OCI layout: %s\n", *ref, w.Digest, w.Layout)
	for p, f := range w.Tarballs {
		fmt.Printf("  %s: docker load -i %s\n", p, f)
	}
	return nil
}
