package dataset

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every bench and e2e check of a copy rests on CompareFolders, so it must see each way
// a copy can be wrong, with names chosen to confuse a sloppy comparison: a long shared
// prefix, a name that is not UTF-8, and a file named like the agents' state that is not
// inside it.
func TestCompareFoldersFindsEveryWrongCopy(t *testing.T) {
	write := func(t *testing.T, p string, b []byte) {
		t.Helper()
		if err := WriteFiles(filepath.Dir(p), map[string][]byte{filepath.Base(p): b}); err != nil {
			t.Fatal(err)
		}
	}
	big := make([]byte, 3<<20+17) // more than the walk's 1 MiB buffer, not a multiple of it
	for i := range big {
		big[i] = byte(i * 7)
	}
	long := strings.Repeat("p", 200)
	files := map[string][]byte{
		"d/big":               big,
		"d/small":             []byte("tiny"),
		"d/empty":             nil,
		"d/" + long + "-a":    []byte("a"),
		"d/" + long + "-b":    []byte("b"),
		"d/not-utf8-\xff\xfe": []byte("bytes of a badly named file"),
	}
	cases := []struct {
		name  string
		spoil func(t *testing.T, dst string)
		want  string // "" when the copy is exact
	}{
		{"exact, with the agent's state beside it", func(t *testing.T, dst string) {
			write(t, filepath.Join(dst, ".dtnflow", "j", "log"), []byte("x"))
		}, ""},
		{"a file missing", func(t *testing.T, dst string) { os.Remove(filepath.Join(dst, "d", "small")) }, "missing at the destination: d/small"},
		{"the badly named file missing", func(t *testing.T, dst string) { os.Remove(filepath.Join(dst, "d", "not-utf8-\xff\xfe")) }, "missing at the destination: d/not-utf8-"},
		{"a bit flipped in the last block", func(t *testing.T, dst string) {
			b := append([]byte(nil), big...)
			b[len(b)-1] ^= 1
			write(t, filepath.Join(dst, "d", "big"), b)
		}, "different at the destination: d/big"},
		{"one byte short", func(t *testing.T, dst string) { write(t, filepath.Join(dst, "d", "big"), big[:len(big)-1]) }, "different at the destination: d/big"},
		{"one byte long", func(t *testing.T, dst string) {
			write(t, filepath.Join(dst, "d", "big"), append(append([]byte(nil), big...), 0))
		}, "different at the destination: d/big"},
		{"an empty file given a byte", func(t *testing.T, dst string) { write(t, filepath.Join(dst, "d", "empty"), []byte{0}) }, "different at the destination: d/empty"},
		{"two files' bytes swapped", func(t *testing.T, dst string) {
			write(t, filepath.Join(dst, "d", "small"), big)
			write(t, filepath.Join(dst, "d", "big"), []byte("tiny"))
		}, "different at the destination: d/big"},
		{"two names with a long shared prefix swapped", func(t *testing.T, dst string) {
			write(t, filepath.Join(dst, "d", long+"-a"), []byte("b"))
			write(t, filepath.Join(dst, "d", long+"-b"), []byte("a"))
		}, "different at the destination: d/" + long + "-a"},
		{"a file the source does not have", func(t *testing.T, dst string) { write(t, filepath.Join(dst, "d", "big.tmp"), []byte("x")) }, "not in the source: d/big.tmp"},
		{"a leftover temporary at the top", func(t *testing.T, dst string) { write(t, filepath.Join(dst, ".big.dtnpart"), []byte("x")) }, "not in the source: .big.dtnpart"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src, dst := t.TempDir(), t.TempDir()
			for _, root := range []string{src, dst} {
				if err := WriteFiles(root, files); err != nil {
					t.Fatal(err)
				}
			}
			c.spoil(t, dst)
			diff, n, err := CompareFolders(src, dst)
			if err != nil {
				t.Fatal(err)
			}
			if n != len(files) {
				t.Errorf("compared %d source files, want %d", n, len(files))
			}
			switch {
			case c.want == "" && diff != "":
				t.Fatalf("an exact copy was refused:\n%s", diff)
			case c.want != "" && !strings.Contains(diff, c.want):
				t.Fatalf("got %q, want a difference saying %q", diff, c.want)
			}
		})
	}
}

// A copy whose folder is missing altogether is an error naming the copy, not an empty
// difference.
func TestCompareFoldersReportsAMissingCopy(t *testing.T) {
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := CompareFolders(src, filepath.Join(t.TempDir(), "absent"))
	if err == nil || !strings.Contains(err.Error(), "reading the copy") {
		t.Fatalf("got %v, want an error reading the copy", err)
	}
}
