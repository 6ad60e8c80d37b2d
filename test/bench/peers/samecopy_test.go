package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The bench's own check of a run's destination: a row's figure counts only when the
// copy is exact, so the check must see each way a copy can be wrong.
func TestSameCopyFindsEveryWrongCopy(t *testing.T) {
	write := func(t *testing.T, p string, b []byte) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	big := make([]byte, 9<<20+17) // more than two of the check's 4 MiB reads
	for i := range big {
		big[i] = byte(i * 7)
	}
	cases := []struct {
		name  string
		spoil func(t *testing.T, dst string)
		want  string // "" when the copy is exact
	}{
		{"exact, with the agent's state beside it", func(t *testing.T, dst string) { write(t, filepath.Join(dst, ".dtnflow", "j", "log"), []byte("x")) }, ""},
		{"a file missing", func(t *testing.T, dst string) { os.Remove(filepath.Join(dst, "d", "small")) }, "lacks"},
		{"a bit flipped in the last block", func(t *testing.T, dst string) {
			b := append([]byte(nil), big...)
			b[len(b)-1] ^= 1
			write(t, filepath.Join(dst, "d", "big"), b)
		}, "differs"},
		{"one byte short", func(t *testing.T, dst string) { write(t, filepath.Join(dst, "d", "big"), big[:len(big)-1]) }, "differs"},
		{"one byte long", func(t *testing.T, dst string) {
			write(t, filepath.Join(dst, "d", "big"), append(append([]byte(nil), big...), 0))
		}, "differs"},
		{"two files' bytes swapped", func(t *testing.T, dst string) {
			write(t, filepath.Join(dst, "d", "small"), big)
			write(t, filepath.Join(dst, "d", "big"), []byte("tiny"))
		}, "differs"},
		{"a file the source does not have", func(t *testing.T, dst string) { write(t, filepath.Join(dst, "d", "big.tmp"), []byte("x")) }, "not in the source"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src, dst := t.TempDir(), t.TempDir()
			for _, root := range []string{src, dst} {
				write(t, filepath.Join(root, "d", "big"), big)
				write(t, filepath.Join(root, "d", "small"), []byte("tiny"))
				write(t, filepath.Join(root, "d", "empty"), nil)
			}
			c.spoil(t, dst)
			err := sameCopy(src, "d", dst)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("an exact copy was refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want an error saying %q", err, c.want)
			}
		})
	}
}
