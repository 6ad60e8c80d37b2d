package main

import (
	"strings"
	"testing"

	"github.com/dtnflow/dtnflow/test/dataset"
)

// The bench's check of a run's destination: a row's figure counts only when the copy is
// exact. test/dataset's own test covers each way a file can be wrong; this one covers
// what the bench adds: a run copies one part of the source (one file, or one folder),
// so the other parts are not asked for, but anything else at the destination fails.
func TestCopyCheckerChecksThePartARunCopied(t *testing.T) {
	src := t.TempDir()
	err := dataset.WriteFiles(src, map[string][]byte{
		"big.bin":     []byte("the large file"),
		"big.bin.old": []byte("a name sharing big.bin's prefix"),
		"small/a":     []byte("a"),
		"small/b":     []byte("b"),
	})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, rel string
		dst       map[string][]byte
		want      string // "" when the copy is exact
	}{
		{"the file alone, with the agent's state", "big.bin", map[string][]byte{"big.bin": []byte("the large file"), ".dtnflow/j": []byte("x")}, ""},
		{"the folder alone", "small", map[string][]byte{"small/a": []byte("a"), "small/b": []byte("b")}, ""},
		{"the folder, one file missing", "small", map[string][]byte{"small/a": []byte("a")}, "missing at the destination: small/b"},
		{"the folder, one file wrong", "small", map[string][]byte{"small/a": []byte("a"), "small/b": []byte("a")}, "different at the destination: small/b"},
		{"the file, with the previous run's folder left", "big.bin", map[string][]byte{"big.bin": []byte("the large file"), "small/a": []byte("a")}, "not in the source: small/a"},
		{"the file under its neighbour's name", "big.bin", map[string][]byte{"big.bin.old": []byte("the large file")}, "missing at the destination: big.bin"},
	}
	checker := &copyChecker{src: src}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dst := t.TempDir()
			if err := dataset.WriteFiles(dst, c.dst); err != nil {
				t.Fatal(err)
			}
			err := checker.check(c.rel, dst)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("an exact copy was refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want an error saying %q", err, c.want)
			}
		})
	}
}
