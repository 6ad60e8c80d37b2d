package agentbuild

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeRepo writes a module whose MainPackage imports one package of its own, and
// returns its root and the imported package's file.
func fakeRepo(t *testing.T) (root, dep string) {
	t.Helper()
	root = t.TempDir()
	files := map[string]string{
		"go.mod":                     "module example.com/fake\n\ngo 1.22\n",
		"cmd/dtnflow-agent/main.go":  "package main\n\nimport \"example.com/fake/mover\"\n\nfunc main() { mover.Move() }\n",
		"mover/mover.go":             "package mover\n\nfunc Move() {}\n",
		"mover/mover_test.go":        "package mover\n",
		"controllers/controllers.go": "package controllers\n",
	}
	for name, text := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root, filepath.Join(root, "mover/mover.go")
}

// setTimes gives every file under root the time at.
func setTimes(t *testing.T, root string, at time.Time) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return os.Chtimes(p, at, at)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestSourcesAreWhatTheAgentImports(t *testing.T) {
	root, _ := fakeRepo(t)
	got, err := Sources(root)
	if err != nil {
		t.Fatal(err)
	}
	var rel []string
	for _, p := range got {
		r, _ := filepath.Rel(root, p)
		rel = append(rel, filepath.ToSlash(r))
	}
	want := "cmd/dtnflow-agent/main.go go.mod mover/mover.go"
	slices.Sort(rel)
	if joined := strings.Join(rel, " "); joined != want {
		t.Fatalf("Sources = %s, want %s (no test file, no package the agent does not import)", joined, want)
	}
}

// TestDescribeFindsAnOlderBinary: a binary written before a source it is built from is
// reported with that source; one written after every source, or older only than a
// file the agent does not import, is not.
func TestDescribeFindsAnOlderBinary(t *testing.T) {
	root, dep := fakeRepo(t)
	bin := filepath.Join(t.TempDir(), "dtnflow-agent")
	if err := os.WriteFile(bin, []byte("a build"), 0o755); err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	setTimes(t, root, base)
	if err := os.Chtimes(bin, base.Add(time.Minute), base.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	info, err := Describe(bin, root)
	if err != nil {
		t.Fatal(err)
	}
	if info.NewerSource != "" || info.Warning() != "" {
		t.Fatalf("a binary built after its sources reported stale: %+v", info)
	}
	if !strings.HasPrefix(info.Digest, "sha256:") || len(info.Digest) != len("sha256:")+12 {
		t.Fatalf("digest %q", info.Digest)
	}

	// A change the agent does not build from (a controller, a test) keeps it current.
	later := base.Add(time.Hour)
	for _, p := range []string{"controllers/controllers.go", "mover/mover_test.go"} {
		if err := os.Chtimes(filepath.Join(root, p), later, later); err != nil {
			t.Fatal(err)
		}
	}
	if info, _ = Describe(bin, root); info.NewerSource != "" {
		t.Fatalf("a change outside the agent's sources reported: %s", info.NewerSource)
	}

	// A change to a package it imports makes it stale, and says which file.
	if err := os.Chtimes(dep, later, later); err != nil {
		t.Fatal(err)
	}
	info, _ = Describe(bin, root)
	if info.NewerSource != dep || !info.NewerSourceTime.Equal(later) {
		t.Fatalf("NewerSource = %q at %v, want %s at %v", info.NewerSource, info.NewerSourceTime, dep, later)
	}
	if w := info.Warning(); !strings.Contains(w, dep) || !strings.Contains(w, info.Digest) {
		t.Fatalf("warning %q names neither the source nor the build", w)
	}
	var report strings.Builder
	info.Report(&report, "dtnflow-agent")
	if !strings.HasPrefix(report.String(), "dtnflow-agent: "+bin+" ("+info.Digest) || !strings.Contains(report.String(), info.Warning()) {
		t.Fatalf("report %q lacks the binary, its digest or the warning", report.String())
	}

	// Two different binaries have different digests.
	other := filepath.Join(t.TempDir(), "dtnflow-agent")
	if err := os.WriteFile(other, []byte("another build"), 0o755); err != nil {
		t.Fatal(err)
	}
	o, _ := Describe(other, "")
	if o.Digest == info.Digest || o.NewerSource != "" {
		t.Fatalf("digests %s and %s; no repository given, NewerSource %q", o.Digest, info.Digest, o.NewerSource)
	}
}

// TestRepoAboveIsThisRepository: run from this package's directory, the repository
// found is the one whose go.mod names this module, above the package.
func TestRepoAboveIsThisRepository(t *testing.T) {
	root := RepoAbove()
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatalf("RepoAbove() = %q: %v", root, err)
	}
	if !strings.HasPrefix(string(mod), "module github.com/dtnflow/dtnflow\n") {
		t.Fatalf("RepoAbove() = %q, whose go.mod starts %q", root, string(mod[:min(len(mod), 40)]))
	}
	wd, _ := os.Getwd()
	if rel, err := filepath.Rel(root, wd); err != nil || rel != filepath.Join("test", "bench", "agentbuild") {
		t.Fatalf("this package is at %q under %q", rel, root)
	}
}
