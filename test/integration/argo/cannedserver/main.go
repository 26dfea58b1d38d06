// Command cannedserver is the floor BenchmarkStatusCalls measures the Argo sidecar against: an
// HTTP server in a process of its own that reads each request to the end and answers with the
// same bytes every time (a reply the sidecar gave), doing nothing else. What it measures is the
// cost of an HTTP call between two processes on this machine, with this client, under this load:
// the part of the sidecar's figure that is not the sidecar's.
//
// It prints "ready" once it listens on --addr, and serves until SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	replyFile := flag.String("reply", "", "file holding the reply body, answered to every request")
	flag.Parse()
	if err := serve(*addr, *replyFile); err != nil {
		fmt.Fprintln(os.Stderr, "cannedserver:", err)
		os.Exit(1)
	}
}

func serve(addr, replyFile string) error {
	reply, err := os.ReadFile(replyFile)
	if err != nil {
		return fmt.Errorf("reading --reply: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_, _ = w.Write(reply)
	})}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	fmt.Println("ready")
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}
