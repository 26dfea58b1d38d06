package argo_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The suite's apiserver writes an audit log, from which BenchmarkSideBySide counts each way's API
// requests: every request once, with who made it (user and user agent), what it did and to which
// object. Metadata level: no bodies, so the log costs the apiserver little.

// auditPolicy logs each request at ResponseStarted (watches: they are counted when they begin)
// and ResponseComplete (everything; by then a create's objectRef carries the new object's name).
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
`

// auditArgs writes the policy into dir and returns the apiserver flags that log to dir/audit.log.
func auditArgs(dir string) (map[string]string, string, error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, "", fmt.Errorf("writing the audit policy: %w", err)
	}
	log := filepath.Join(dir, "audit.log")
	return map[string]string{
		"audit-policy-file": policy,
		"audit-log-path":    log,
		"audit-log-format":  "json",
		"audit-log-mode":    "blocking", // written before the response: a read after a request sees it
		"audit-log-maxsize": "0",        // never rotated
	}, log, nil
}

// auditEvent is the part of an audit.k8s.io/v1 Event the benchmark reads.
type auditEvent struct {
	AuditID    string `json:"auditID"`
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	UserAgent  string `json:"userAgent"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	RequestReceivedTimestamp metav1.MicroTime `json:"requestReceivedTimestamp"`
}

func (e auditEvent) name() string {
	if e.ObjectRef == nil {
		return ""
	}
	return e.ObjectRef.Name
}

// what is "verb resource[/subresource]", for breakdowns.
func (e auditEvent) what() string {
	if e.ObjectRef == nil {
		return e.Verb + " " + e.RequestURI
	}
	r := e.ObjectRef.Resource
	if e.ObjectRef.Subresource != "" {
		r += "/" + e.ObjectRef.Subresource
	}
	return e.Verb + " " + r
}

// auditSize is the log's size now: the offset from which a later readAudit reads.
func auditSize(path string) (int64, error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, fmt.Errorf("the apiserver's audit log: %w", err)
	}
	return st.Size(), nil
}

// readAudit returns the requests logged from offset on that the apiserver received at or after
// from, one event per request (its last stage).
func readAudit(path string, offset int64, from time.Time) ([]auditEvent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, err
	}
	byID := map[string]auditEvent{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("reading the audit log: %w", err)
		}
		if e.RequestReceivedTimestamp.Time.Before(from) {
			continue
		}
		byID[e.AuditID] = e
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	events := make([]auditEvent, 0, len(byID))
	for _, e := range byID {
		events = append(events, e)
	}
	sort.Slice(events, func(i, j int) bool {
		return events[i].RequestReceivedTimestamp.Before(&events[j].RequestReceivedTimestamp)
	})
	return events, nil
}

// breakdown is "count what" lines, most frequent first, for the benchmark's log.
func breakdown(events []auditEvent) string {
	counts := map[string]int{}
	for _, e := range events {
		counts[e.what()]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if counts[keys[i]] != counts[keys[j]] {
			return counts[keys[i]] > counts[keys[j]]
		}
		return keys[i] < keys[j]
	})
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "  %4d %s\n", counts[k], k)
	}
	return b.String()
}
