// Package agentbuild says which build of dtnflow-agent a benchmark measured. The
// benchmarks take the agent as a path (-agent), and a binary built before the last
// change to the agent's sources measures the code as it was, not as the figures'
// commit says: on 2026-12-01 a suite and three bench-peers runs labelled with the
// 64 MiB chunk size ran a bin/dtnflow-agent built half an hour before that change
// (docs/benchmarks.md). So every result records the binary's digest, and a binary
// older than one of the sources it is built from is reported before anything runs.
package agentbuild

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// MainPackage is the agent's main package, relative to the repository's root.
const MainPackage = "./cmd/dtnflow-agent"

// Info is what a benchmark records of the agent binary it ran.
type Info struct {
	Path string
	// Digest is "sha256:" and the first 12 hexadecimal digits of the binary's SHA-256:
	// enough to tell two builds apart in a results file.
	Digest   string
	Modified time.Time
	// NewerSource is a source file of the agent (a Go file of the main module that
	// MainPackage depends on, or go.mod or go.sum) changed after the binary was
	// written, and NewerSourceTime its modification time; "" when there is none or
	// the sources were not found.
	NewerSource     string
	NewerSourceTime time.Time
}

// Describe digests the binary at path and compares its modification time with the
// agent's sources in the repository at repoRoot ("": no comparison). A repository
// whose package list cannot be read (no Go toolchain, another tree) leaves
// NewerSource empty: the digest is still recorded.
func Describe(path, repoRoot string) (Info, error) {
	f, err := os.Open(path)
	if err != nil {
		return Info{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Info{}, err
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return Info{}, fmt.Errorf("reading %s: %w", path, err)
	}
	info := Info{Path: path, Digest: "sha256:" + hex.EncodeToString(h.Sum(nil))[:12], Modified: st.ModTime()}
	if repoRoot == "" {
		return info, nil
	}
	sources, err := Sources(repoRoot)
	if err != nil {
		return info, nil
	}
	for _, src := range sources {
		fi, err := os.Stat(src)
		if err != nil || !fi.ModTime().After(info.Modified) {
			continue
		}
		if info.NewerSource == "" || fi.ModTime().After(info.NewerSourceTime) {
			info.NewerSource, info.NewerSourceTime = src, fi.ModTime()
		}
	}
	return info, nil
}

// Sources lists the files the agent binary is built from in the repository at
// repoRoot: the Go files of the main module's packages that MainPackage imports,
// directly or not, and the module's go.mod and go.sum.
func Sources(repoRoot string) ([]string, error) {
	cmd := exec.Command("go", "list", "-deps", "-f", `{{if and .Module .Module.Main}}{{range .GoFiles}}{{$.Dir}}{{"\x00"}}{{.}}{{"\n"}}{{end}}{{end}}`, MainPackage)
	cmd.Dir = repoRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s in %s: %w: %s", MainPackage, repoRoot, err, strings.TrimSpace(stderr.String()))
	}
	var files []string
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		dir, name, ok := strings.Cut(line, "\x00")
		if ok {
			files = append(files, filepath.Join(dir, name))
		}
	}
	for _, name := range []string{"go.mod", "go.sum"} {
		if _, err := os.Stat(filepath.Join(repoRoot, name)); err == nil {
			files = append(files, filepath.Join(repoRoot, name))
		}
	}
	return files, nil
}

// RepoAbove is the repository a benchmark runs in: the nearest directory at or above
// the working directory that holds a go.mod; "" outside one.
func RepoAbove() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// Report writes to w, under label, what a benchmark is about to run: the binary, its
// digest and when it was written, then Warning's line when there is one.
func (i Info) Report(w io.Writer, label string) {
	fmt.Fprintf(w, "%s: %s (%s, written %s)\n", label, i.Path, i.Digest, i.Modified.UTC().Format(time.DateTime))
	if msg := i.Warning(); msg != "" {
		fmt.Fprintln(w, msg)
	}
}

// Warning is what a benchmark prints before it runs a stale binary; "" when the
// binary is not older than its sources.
func (i Info) Warning() string {
	if i.NewerSource == "" {
		return ""
	}
	return fmt.Sprintf("WARNING: %s (%s, written %s) is older than its source %s (changed %s): the figures measure the code as it was when it was built; rebuild it (make build) to measure this tree",
		i.Path, i.Digest, i.Modified.UTC().Format(time.DateTime), i.NewerSource, i.NewerSourceTime.UTC().Format(time.DateTime))
}
