package mover

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// The per-file path opens and renames one name on the directory's descriptor; it must
// keep every promise of the os.Root it stands in for: nothing outside the root, symlinks
// inside it followed as before, errors that say what they were.
func TestCachedDirKeepsTheRootsPromises(t *testing.T) {
	top := t.TempDir()
	outside := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(top, "d", "sub"), 0o755))
	must(os.WriteFile(filepath.Join(top, "d", "plain"), []byte("plain"), 0o644))
	must(os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644))
	must(os.Symlink("plain", filepath.Join(top, "d", "inside")))                          // stays in the root
	must(os.Symlink(filepath.Join(outside, "secret"), filepath.Join(top, "d", "escape"))) // leaves it
	must(os.Symlink("../../..", filepath.Join(top, "d", "up")))
	root, err := os.OpenRoot(top)
	must(err)
	defer root.Close()
	dirs := newDirCache(root, false)
	d, err := dirs.get("d")
	must(err)

	read := func(name string) (string, error) {
		f, err := d.openFile(name, os.O_RDONLY, 0)
		if err != nil {
			return "", err
		}
		defer f.Close()
		b, err := io.ReadAll(f)
		return string(b), err
	}
	for _, tc := range []struct {
		name, want string
		refused    bool
	}{
		{name: "plain", want: "plain"},
		{name: "inside", want: "plain"}, // os.Root follows a link that stays inside
		{name: "escape", refused: true},
		{name: "up/etc/passwd", refused: true},
		{name: "..", refused: true},
		{name: "../d/plain", refused: true}, // the directory's os.Root confines to it
		{name: "sub/../plain", want: "plain"},
		{name: "missing", refused: true},
		{name: "bad\x00name", refused: true},
		{name: "", refused: true},
	} {
		got, err := read(tc.name)
		switch {
		case tc.refused && err == nil:
			t.Errorf("%q: read %q, want refused", tc.name, got)
		case !tc.refused && err != nil:
			t.Errorf("%q: %v", tc.name, err)
		case !tc.refused && got != tc.want:
			t.Errorf("%q: read %q, want %q", tc.name, got, tc.want)
		}
	}
	if _, err := read("missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v, want ErrNotExist", err)
	}

	// Writing: created with the asked permissions, truncated when it exists.
	f, err := d.openFile("tmp", os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	must(err)
	_, err = f.Write([]byte("first, longer"))
	must(err)
	must(f.Close())
	f, err = d.openFile("tmp", os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	must(err)
	_, err = f.Write([]byte("second"))
	must(err)
	fi, err := f.Stat()
	must(err)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("created with %v, want -rw-------", fi.Mode().Perm())
	}
	must(f.Close())
	// A symlink in a temporary file's place that leads out of the root is refused, and
	// the file outside is left as it was.
	must(os.Symlink(filepath.Join(outside, "secret"), filepath.Join(top, "d", "trap")))
	if f, err := d.openFile("trap", os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600); err == nil {
		f.Close()
		t.Error("opened a symlink out of the root for writing")
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); !bytes.Equal(b, []byte("secret")) {
		t.Errorf("the file outside the root now holds %q", b)
	}

	// Renaming: replaces a file, refuses a directory, says ErrNotExist for a name gone.
	must(d.rename("tmp", "plain"))
	if b, _ := os.ReadFile(filepath.Join(top, "d", "plain")); string(b) != "second" {
		t.Errorf("after rename: %q", b)
	}
	if _, err := os.Lstat(filepath.Join(top, "d", "tmp")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the temporary name is still there: %v", err)
	}
	must(os.WriteFile(filepath.Join(top, "d", "tmp2"), nil, 0o600))
	if err := d.rename("tmp2", "sub"); err == nil {
		t.Error("renamed a file over a directory")
	}
	if err := d.rename("gone", "plain"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("renaming a missing file: %v, want ErrNotExist", err)
	}
	if err := d.rename("tmp2", "../escaped"); err == nil {
		t.Error("renamed out of the directory")
	}

	// The directory removed under the cache: the per-file path says ErrNotExist, as the
	// os.Root did, so that the receiver resolves it again.
	must(os.RemoveAll(filepath.Join(top, "d")))
	if _, err := d.openFile("new", os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("creating in a removed directory: %v, want ErrNotExist", err)
	}
}

// BenchmarkOpenSmallFile compares what one small file's open costs through the
// os.Root and through the directory's descriptor (openFile).
func BenchmarkOpenSmallFile(b *testing.B) {
	top := b.TempDir()
	if err := os.WriteFile(filepath.Join(top, "f"), make([]byte, 64<<10), 0o644); err != nil {
		b.Fatal(err)
	}
	root, err := os.OpenRoot(top)
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	d := newDirCache(root, false).top
	for _, c := range []struct {
		name string
		open func() (*os.File, error)
	}{
		{"os.Root", func() (*os.File, error) { return root.Open("f") }},
		{"descriptor", func() (*os.File, error) { return d.openFile("f", os.O_RDONLY, 0) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				f, err := c.open()
				if err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
		})
	}
}

// A directory counts as made by the cache only when the cache's own Mkdir created it:
// a receiver presumes its files absent only there (rsession.presumedAbsent).
func TestDirCacheSaysWhichDirectoriesItMade(t *testing.T) {
	top := t.TempDir()
	os.MkdirAll(filepath.Join(top, "there", "sub"), 0o755)
	os.WriteFile(filepath.Join(top, "afile"), []byte("x"), 0o644)
	os.Symlink("there", filepath.Join(top, "link"))
	root, err := os.OpenRoot(top)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	dirs := newDirCache(root, true)
	for _, tc := range []struct {
		dir       string
		made, err bool
	}{
		{dir: "new", made: true},
		{dir: "a/b/c", made: true}, // parents made on the way
		{dir: "a/b", made: false},  // made by the line before, as a parent: found here
		{dir: "there", made: false},
		{dir: "there/sub", made: false},
		{dir: "there/new", made: true},
		{dir: "link/new2", made: true}, // through a link inside the root
		{dir: "link", made: false},
		{dir: "afile", err: true},
		{dir: "afile/below", err: true},
	} {
		d, err := dirs.get(tc.dir)
		if (err != nil) != tc.err {
			t.Errorf("%s: error %v, want error %v", tc.dir, err, tc.err)
			continue
		}
		if err == nil && d.made != tc.made {
			t.Errorf("%s: made %v, want %v", tc.dir, d.made, tc.made)
		}
	}
	if d, err := newDirCache(root, true).get("new"); err != nil || d.made {
		t.Errorf("another cache's get of a directory this one made: %v %v, want found, not made", d, err)
	}
	if d, err := newDirCache(root, false).get("never-made"); err == nil {
		t.Errorf("a cache that does not create found a missing directory: %+v", d)
	}
}
