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
	options := image.BuildFlags(fs, "dev")
	if err := fs.Parse(args); err != nil {
		return err
	}
	opts, err := options()
	if err != nil {
		return err
	}
	idx, err := image.Build(ctx, opts)
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
