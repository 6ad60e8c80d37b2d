// Package dataset tells whether a copy of a folder is exact: every source file at the
// same path with the same SHA-256, and nothing else. It uses the standard library only,
// so that the loopback benches can check their copies without pulling in the e2e
// framework's Kubernetes clients.
package dataset

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Digests is the SHA-256 of every regular file under dir, by slash-separated path
// relative to dir. Folders and files whose name starts with ".dtnflow" (the agents'
// journals) are skipped.
func Digests(dir string) (map[string]string, error) {
	sums := map[string]string{}
	buf := make([]byte, 1<<20) // one buffer for the whole walk, not one per file
	err := WalkOutsideJournals(dir, func(path string, d fs.DirEntry) error {
		if !d.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.CopyBuffer(h, onlyReader{f}, buf); err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		sums[filepath.ToSlash(rel)] = hex.EncodeToString(h.Sum(nil))
		return nil
	})
	return sums, err
}

// WalkOutsideJournals calls fn for every entry under dir (dir itself included), in
// lexical order, leaving out the folders and files whose name starts with ".dtnflow"
// (the agents' journals and state). An error reading dir or from fn ends the walk.
func WalkOutsideJournals(dir string, fn func(path string, d fs.DirEntry) error) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), ".dtnflow") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		return fn(path, d)
	})
}

// onlyReader hides a file's WriterTo so that io.CopyBuffer uses the buffer it is given.
type onlyReader struct{ io.Reader }

// CompareDigests describes every difference between the files at the source and at the
// destination (missing, extra or different), or returns "" when they are identical.
func CompareDigests(source, destination map[string]string) string {
	var diffs []string
	for path, sum := range source {
		switch got, ok := destination[path]; {
		case !ok:
			diffs = append(diffs, "missing at the destination: "+path)
		case got != sum:
			diffs = append(diffs, fmt.Sprintf("different at the destination: %s (sha256 %.12s, source %.12s)", path, got, sum))
		}
	}
	for path := range destination {
		if _, ok := source[path]; !ok {
			diffs = append(diffs, "not in the source: "+path)
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 20 {
		diffs = append(diffs[:20], fmt.Sprintf("... and %d more", len(diffs)-20))
	}
	return strings.Join(diffs, "\n")
}

// CompareFolders compares the copy at destination with the folder source: it returns
// the differences ("" when the copy is exact) and the number of source files. An error
// means a folder could not be read, which is not a verdict on the copy.
func CompareFolders(source, destination string) (diff string, files int, err error) {
	src, err := Digests(source)
	if err != nil {
		return "", 0, fmt.Errorf("reading the source: %w", err)
	}
	dst, err := Digests(destination)
	if err != nil {
		return "", 0, fmt.Errorf("reading the copy: %w", err)
	}
	return CompareDigests(src, dst), len(src), nil
}

// WriteFiles writes each file (by slash-separated path under root, with its contents),
// creating folders as needed: the fixtures of the tests that check copies.
func WriteFiles(root string, files map[string][]byte) error {
	for rel, b := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
