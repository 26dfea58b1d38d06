package testenv

import (
	"context"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Namespace creates a namespace for this test alone, with the default ServiceAccount that
// kube-controller-manager would otherwise create (it may not run), and deletes the namespace
// when the test ends. Without a controller manager the namespace then stays Terminating,
// which is harmless: names are never reused.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	ctx := t.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: namespacePrefix(t.Name())}}
	if err := e.Client.Create(ctx, ns); err != nil {
		t.Fatalf("creating a namespace for %s: %v", t.Name(), err)
	}
	t.Cleanup(func() {
		// t.Context() is already cancelled when cleanups run.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), Timeout)
		defer cancel()
		if err := client.IgnoreNotFound(e.Client.Delete(ctx, ns)); err != nil {
			t.Errorf("deleting namespace %s: %v", ns.Name, err)
		}
	})

	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns.Name}}
	if err := e.Client.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating ServiceAccount %s/default: %v", ns.Name, err)
	}
	return ns.Name
}

var notDNSLabel = regexp.MustCompile(`[^a-z0-9-]+`)

// namespacePrefix turns a test name into a GenerateName prefix, so that a leftover namespace
// tells which test made it: "TestFoo/bar_baz" becomes "testfoo-bar-baz-".
func namespacePrefix(testName string) string {
	p := strings.Trim(notDNSLabel.ReplaceAllString(strings.ToLower(testName), "-"), "-")
	// Names are DNS labels of at most 63 characters; the server appends 5 random ones.
	const maxPrefix = 63 - 5 - 1
	if len(p) > maxPrefix {
		p = strings.TrimRight(p[:maxPrefix], "-")
	}
	if p == "" {
		p = "test"
	}
	return p + "-"
}
