// Package compat is the compatibility matrix's results file (docs/compatibility.json): what each
// row (one release of Argo, Tekton, Kubernetes or the Trainer) proved the last time `make
// test-compat` (hack/compat) ran it. hack/compat writes it; the generated docs read it.
package compat

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
)

// Row is what one run of one row proved, as kept in docs/compatibility.json.
type Row struct {
	ID      string `json:"id"`
	System  string `json:"system"`
	Version string `json:"version"`
	// Date (UTC) and Commit of the run, and the Machine it ran on.
	Date    string  `json:"date"`
	Commit  string  `json:"commit"`
	Machine Machine `json:"machine"`
	// Status is pass, fail (a test failed) or error (the assets or the suite could not run:
	// Reason says why).
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	// BuildSeconds is how long ensuring the assets took; BuildCached says they were already
	// there (so it is not a cold build's cost).
	BuildSeconds int    `json:"build_seconds"`
	BuildCached  bool   `json:"build_cached"`
	TestSeconds  int    `json:"test_seconds"`
	Faces        []Face `json:"faces,omitempty"`
}

// machine is what the figures were measured on.
type Machine struct {
	CPUs      int    `json:"cpus"`
	MemoryGiB int    `json:"memory_gib"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
}

func (m Machine) String() string {
	return fmt.Sprintf("%d CPUs, %d GiB, %s %s", m.CPUs, m.MemoryGiB, m.OS, m.Arch)
}

// Face is one test package under one release.
type Face struct {
	Package string `json:"package"`
	// Status is pass or fail; a package that failed without a failing test (TestMain, build)
	// has Failure set and may have no cases.
	Status  string `json:"status"`
	Failure string `json:"failure,omitempty"`
	Cases   []Case `json:"cases"`
}

// Case is one top-level test of one package: a case of the table.
type Case struct {
	Name string `json:"name"`
	// Status is pass, fail or skip.
	Status string `json:"status"`
	// Failure is the first failure line of the test or its subtests, for a failed case.
	Failure string `json:"failure,omitempty"`
	// Notes are what a passing case said the release lacks and how trainstep answered it
	// (lines the test logged with NotePrefix), for the table's notes.
	Notes []string `json:"notes,omitempty"`
}

// NotePrefix marks a test's log line for the table: what the release under test cannot do and
// what trainstep does instead (test/internal/realstack.Lacks logs it).
const NotePrefix = "compat-note: "

// Load reads the results file, its rows in its order (the matrix's); a missing file is an empty
// table.
func Load(file string) ([]Row, error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var list []Row
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("reading %s (delete it to start the table anew): %w", file, err)
	}
	return list, nil
}

// ByID maps rows by their ID.
func ByID(rows []Row) map[string]Row {
	m := make(map[string]Row, len(rows))
	for _, r := range rows {
		m[r.ID] = r
	}
	return m
}

// Notes counts the notes of the row's passing cases.
func (r Row) Notes() int {
	n := 0
	for _, f := range r.Faces {
		for _, c := range f.Cases {
			n += len(c.Notes)
		}
	}
	return n
}

// Summary is a failed row in a few words: the reason it could not run, or its failed cases.
func (r Row) Summary() string {
	if r.Status == "error" {
		return "could not run: " + r.Reason
	}
	failed := 0
	for _, f := range r.Faces {
		for _, c := range f.Cases {
			if c.Status == "fail" {
				failed++
			}
		}
	}
	return fmt.Sprintf("%d cases failed, see docs/compatibility.md", failed)
}
