// Command generate writes every generated file of the repository (make generate), or with
// -verify lists the stale ones and the hand-written version claims that disagree with their
// sources, and fails if there are any (make verify). Run it from the repository root.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/trainstep/trainstep/internal/generate"
)

func main() {
	verify := flag.Bool("verify", false, "do not write: list stale generated files and disagreeing version claims, and exit 1 if there are any")
	flag.Parse()
	if *verify {
		stale, err := generate.Stale(".")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for _, p := range stale {
			fmt.Fprintf(os.Stderr, "stale: %s (run `make generate` and commit the result)\n", p)
		}
		wrong, err := generate.Disagreements(".")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for _, d := range wrong {
			fmt.Fprintln(os.Stderr, "version claim:", d)
		}
		if len(stale)+len(wrong) > 0 {
			os.Exit(1)
		}
		return
	}
	changed, err := generate.Write(".")
	for _, p := range changed {
		fmt.Println("wrote", p)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
