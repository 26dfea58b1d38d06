// Package tektonrbac_test runs trainstep's Tekton face under Tekton's own pipelines controller
// as a user holding manifests/tekton/rbac.yaml's rules, or fewer, as after an upgrade whose new
// rule was not applied. test/e2e/tekton's controller runs as an admin over every namespace; here
// each test starts its own, limited to its namespace and its user, so no other controller acts on
// its runs. The Trainer simulator stands in for the Trainer.
package tektonrbac_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/trainstep/trainstep/test/internal/tektonharness"
)

var bed *tektonharness.Bed

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctrllog.SetLogger(logr.Discard())
	var err error
	if bed, err = tektonharness.StartBed(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := bed.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	return m.Run()
}
