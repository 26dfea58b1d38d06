package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"

	"github.com/trainstep/trainstep/internal/compat"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// parseGoTest reads `go test -json` output and returns one result per package, in package order.
func parseGoTest(r io.Reader, modulePrefix string) ([]compat.Face, error) {
	type pkgState struct {
		status string
		output []string
		cases  map[string]*compat.Case
		order  []string
		// outputs of each top-level test, its subtests' included
		testOut map[string][]string
	}
	pkgs := map[string]*pkgState{}
	get := func(p string) *pkgState {
		if s, ok := pkgs[p]; ok {
			return s
		}
		s := &pkgState{cases: map[string]*compat.Case{}, testOut: map[string][]string{}}
		pkgs[p] = s
		return s
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var ev event
		if err := json.Unmarshal(line, &ev); err != nil || ev.Package == "" {
			// go test prints build errors as plain text before the JSON stream.
			continue
		}
		s := get(ev.Package)
		top, _, _ := strings.Cut(ev.Test, "/")
		switch {
		case ev.Test == "" && ev.Action == "output":
			s.output = append(s.output, strings.TrimRight(ev.Output, "\n"))
		case ev.Test == "" && (ev.Action == "pass" || ev.Action == "fail" || ev.Action == "skip"):
			s.status = ev.Action
		case ev.Action == "output":
			s.testOut[top] = append(s.testOut[top], strings.TrimRight(ev.Output, "\n"))
		case ev.Test == top && (ev.Action == "pass" || ev.Action == "fail" || ev.Action == "skip"):
			c, ok := s.cases[top]
			if !ok {
				c = &compat.Case{Name: top}
				s.cases[top] = c
				s.order = append(s.order, top)
			}
			c.Status = ev.Action
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading go test -json output: %w", err)
	}
	names := make([]string, 0, len(pkgs))
	for p := range pkgs {
		names = append(names, p)
	}
	sort.Strings(names)
	var out []compat.Face
	for _, p := range names {
		s := pkgs[p]
		f := compat.Face{Package: strings.TrimPrefix(p, modulePrefix), Status: s.status}
		if f.Status == "skip" { // no test files
			continue
		}
		sort.Strings(s.order)
		for _, name := range s.order {
			c := *s.cases[name]
			if c.Status == "fail" {
				c.Failure = firstFailure(s.testOut[name])
			}
			c.Notes = notes(s.testOut[name])
			f.Cases = append(f.Cases, c)
		}
		if f.Status == "" { // the stream ended before the package did (killed, timed out)
			f.Status = "fail"
		}
		if f.Status == "fail" && !anyFailed(f.Cases) {
			f.Failure = firstPackageFailure(s.output)
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return nil, errors.New("go test reported no package")
	}
	return out, nil
}

func anyFailed(cs []compat.Case) bool {
	for _, c := range cs {
		if c.Status == "fail" {
			return true
		}
	}
	return false
}

var (
	// testify's "Error:" line, the message of a failed assertion.
	testifyError = regexp.MustCompile(`^\s*Error:\s*(.*\S)`)
	// t.Error/t.Fatal output: "    file_test.go:12: message" (testify's header has no message).
	fileLine = regexp.MustCompile(`^\s*([\w.-]+\.go:\d+):(.*)$`)
	// testify's "Messages:" line, the message the test gave the assertion.
	testifyMessages = regexp.MustCompile(`^\s*Messages:\s*(.*\S)`)
	// a panic
	panicLine = regexp.MustCompile(`^panic: .*`)
)

// firstFailure is the line that says what went wrong first: the first failing file:line with its
// message, or with testify's Error line when it is testify's header (no message of its own).
func firstFailure(lines []string) string {
	for i, l := range lines {
		if m := panicLine.FindString(l); m != "" {
			return m
		}
		m := fileLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		if msg := strings.TrimSpace(m[2]); msg != "" {
			return m[1] + ": " + msg
		}
		if msg := testifyMessage(lines[i+1:]); msg != "" {
			return m[1] + ": " + msg
		}
		return m[1]
	}
	for _, l := range lines {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "=== ") && !strings.HasPrefix(t, "--- ") {
			return t
		}
	}
	return "failed (no failure line in its output)"
}

// testifyMessage is the Error line of testify's report in lines, with the line after it when
// the Error line only introduces it ("Received unexpected error:").
func testifyMessage(lines []string) string {
	for i, l := range lines {
		e := testifyError.FindStringSubmatch(l)
		if e == nil {
			continue
		}
		msg := e[1]
		if strings.HasSuffix(msg, ":") && i+1 < len(lines) {
			msg += " " + strings.TrimSpace(lines[i+1])
		}
		// The assertion's own message says what was awaited ("Condition never satisfied").
		for _, next := range lines[i+1:] {
			if m := testifyMessages.FindStringSubmatch(next); m != nil {
				return msg + ": " + m[1]
			}
			if testifyError.MatchString(next) {
				break
			}
		}
		return msg
	}
	return ""
}

// failureWords mark the line of a package's own output that says what went wrong, among the
// progress lines a TestMain prints ("stack up in 17.2s").
var failureWords = regexp.MustCompile(`(?i)error|fail|panic|deadline|cannot|can't|no such|refused|missing|timed out|not set|invalid`)

// firstPackageFailure is what a package that failed outside any test printed first that reads
// as a failure: TestMain's error, a build error, a timeout; else its first line.
func firstPackageFailure(lines []string) string {
	var first string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		switch {
		case t == "", t == "FAIL", t == "PASS", strings.HasPrefix(t, "FAIL\t"), strings.HasPrefix(t, "ok "),
			strings.HasPrefix(t, "exit status"), strings.HasPrefix(t, "=== "), strings.HasPrefix(t, "--- "):
			continue
		}
		if failureWords.MatchString(t) {
			return t
		}
		if first == "" {
			first = t
		}
	}
	if first != "" {
		return first
	}
	return "the package failed outside any test (no output)"
}

// notes are the NotePrefix lines of a test's output (its subtests' too), each once.
func notes(lines []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, l := range lines {
		_, note, ok := strings.Cut(l, compat.NotePrefix)
		if note = strings.TrimSpace(note); ok && note != "" && !seen[note] {
			seen[note] = true
			out = append(out, note)
		}
	}
	return out
}
