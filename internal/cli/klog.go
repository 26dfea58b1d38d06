package cli

import (
	"fmt"
	"io"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/klog/v2"
)

// quietKlog keeps client-go's informational chatter (a watch ended because the wait returned, …)
// out of a one-shot command's output; its errors still reach stderr.
func quietKlog(stderr io.Writer) {
	klog.SetLogger(logr.New(&errorsOnly{sink: funcr.New(func(prefix, args string) {
		fmt.Fprintln(stderr, "trainstep: client:", prefix, args)
	}, funcr.Options{}).GetSink()}))
}

type errorsOnly struct{ sink logr.LogSink }

func (e *errorsOnly) Init(info logr.RuntimeInfo)             { e.sink.Init(info) }
func (e *errorsOnly) Enabled(int) bool                       { return false }
func (e *errorsOnly) Info(int, string, ...any)               {}
func (e *errorsOnly) Error(err error, msg string, kv ...any) { e.sink.Error(err, msg, kv...) }
func (e *errorsOnly) WithValues(kv ...any) logr.LogSink {
	return &errorsOnly{sink: e.sink.WithValues(kv...)}
}
func (e *errorsOnly) WithName(name string) logr.LogSink {
	return &errorsOnly{sink: e.sink.WithName(name)}
}
