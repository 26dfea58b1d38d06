package image

import (
	"flag"
	"os"
	"strings"
	"time"
)

// BuildFlags registers on fs the flags that say what to build (release, commit, time, source,
// platforms), the ones hack/image and hack/release share, and returns what reads them back as
// Options for the repository in the working directory once fs is parsed. defaultVersion is the
// release when --version is not given ("" where the caller requires it).
func BuildFlags(fs *flag.FlagSet, defaultVersion string) func() (Options, error) {
	release := fs.String("version", defaultVersion, "the release stamped into the binary and the labels")
	rev := fs.String("commit", "unknown", "the commit stamped into the binary and the labels")
	created := fs.Int64("created", 0, "the Unix time of every file and of the config: the commit's (git log -1 --format=%ct)")
	source := fs.String("source", "https://github.com/trainstep/trainstep", "org.opencontainers.image.source")
	platforms := fs.String("platforms", strings.Join(DefaultPlatforms, ","), "comma-separated os/arch")
	return func() (Options, error) {
		root, err := os.Getwd()
		if err != nil {
			return Options{}, err
		}
		return Options{Root: root, Version: *release, Commit: *rev, Created: time.Unix(*created, 0).UTC(),
			Source: *source, Platforms: strings.Split(*platforms, ",")}, nil
	}
}
