package fsroot

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestClean(t *testing.T) {
	cases := map[string]struct {
		in      string
		want    string
		escapes bool
	}{
		"plain":          {in: "a/b.dat", want: "a/b.dat"},
		"dot segments":   {in: "./a//b/./c", want: "a/b/c"},
		"absolute":       {in: "/etc/passwd", escapes: true},
		"dotdot":         {in: "a/../../etc", escapes: true},
		"dotdot trailer": {in: "a/..", escapes: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Clean(tc.in, false)
			if tc.escapes {
				if !errors.Is(err, ErrEscape) || !strings.Contains(err.Error(), tc.in) {
					t.Fatalf("Clean(%q) = %q, %v; want an escape error naming the path", tc.in, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Clean(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestWalkRefusesSymlinkOutside(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	os.MkdirAll(filepath.Join(root, "d"), 0o755)
	os.WriteFile(filepath.Join(root, "d", "ok.dat"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(dir, "secret"), []byte("s"), 0o600)
	os.Symlink("ok.dat", filepath.Join(root, "d", "inside"))
	r, err := os.OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got []string
	collect := func(f File) error { got = append(got, f.Path); return nil }
	if err := Walk(r, "d", collect, func(string, string) {}, nil); err != nil {
		t.Fatalf("walk inside: %v", err)
	}
	if strings.Join(got, ",") != "d/inside,d/ok.dat" {
		t.Fatalf("walk found %v", got)
	}
	os.Symlink("../../secret", filepath.Join(root, "d", "evil"))
	err = Walk(r, "d", collect, func(string, string) {}, nil)
	if !errors.Is(err, ErrEscape) || !strings.Contains(err.Error(), "d/evil") {
		t.Fatalf("walk over an escaping symlink: %v; want an escape error naming d/evil", err)
	}
}

// TestWalkLeavesTheJournalsOut: .dtnflow at the top of a root holds receivers'
// journals when the root is also a destination. A walk of the root skips it, saying
// so; a walk asked for it, however the path is written, is refused; a .dtnflow deeper
// down, and names that only begin like it, are data.
func TestWalkLeavesTheJournalsOut(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{".dtnflow/job-1/r.log", "d/.dtnflow/x", ".dtnflowrc"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(dir, p), []byte(p), 0o644)
	}
	r, w := walkTo(t, dir)
	if err := Walk(r, ".", w.file, w.skip, nil); err != nil {
		t.Fatal(err)
	}
	if strings.Join(w.got, ",") != ".dtnflowrc,d/.dtnflow/x" || len(w.skipped) != 1 || !strings.HasPrefix(w.skipped[0], ".dtnflow: ") {
		t.Fatalf("a walk of the root found %v, skipped %v", w.got, w.skipped)
	}
	for _, p := range []string{".dtnflow", "./.dtnflow/job-1", ".//.dtnflow/job-1/r.log"} {
		if err := Walk(r, p, w.file, w.skip, nil); err == nil || !strings.Contains(err.Error(), "holds the receivers' journals") {
			t.Errorf("a walk of %q: %v; want a refusal", p, err)
		}
	}
}

// TestWalkSkipsSymlinksToNothing: a dangling symlink (what it named was removed) or a
// loop holds no data: the walk skips it, saying why, and lists the rest — it used to
// fail the whole listing ("statat d/dangling: no such file or directory"), under
// SourceErrors=Skip too. A symlink leading outside the root is still refused, whether
// or not its target exists.
func TestWalkSkipsSymlinksToNothing(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	os.MkdirAll(filepath.Join(root, "d"), 0o755)
	os.WriteFile(filepath.Join(root, "d", "ok.dat"), []byte("x"), 0o644)
	os.Symlink("gone", filepath.Join(root, "d", "dangling"))
	os.Symlink("loop", filepath.Join(root, "d", "loop"))
	os.Symlink("ping", filepath.Join(root, "d", "pong"))
	os.Symlink("pong", filepath.Join(root, "d", "ping"))
	r, w := walkTo(t, root)
	if err := Walk(r, "d", w.file, w.skip, nil); err != nil {
		t.Fatalf("walk: %v", err)
	}
	want := []string{"d/dangling: a symlink to nothing (its target does not exist)", "d/loop: a symlink loop", "d/ping: a symlink loop", "d/pong: a symlink loop"}
	if strings.Join(w.got, ",") != "d/ok.dat" || strings.Join(w.skipped, "\n") != strings.Join(want, "\n") {
		t.Fatalf("walk found %v, skipped\n%s", w.got, strings.Join(w.skipped, "\n"))
	}
	os.Symlink("../../nowhere", filepath.Join(root, "d", "out"))
	if err := Walk(r, "d", w.file, w.skip, nil); !errors.Is(err, ErrEscape) || !strings.Contains(err.Error(), "d/out") {
		t.Fatalf("a dangling symlink leading outside: %v; want an escape error naming d/out", err)
	}
}

// walked is what a walk gave its callbacks.
type walked struct{ got, skipped []string }

func (w *walked) file(f File) error     { w.got = append(w.got, f.Path); return nil }
func (w *walked) skip(path, why string) { w.skipped = append(w.skipped, path+": "+why) }

// walkTo opens dir as a root, closed at the test's end, and a record of a walk.
func walkTo(t *testing.T, dir string) (*os.Root, *walked) {
	t.Helper()
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, &walked{}
}

// TestWalkOfManyFilesReportsEachFilesOwnFacts walks a directory large enough for its
// lstats to run on several goroutines (statRegular), mixed with a subdirectory, a
// symlink to a file, a symlink to nothing and a FIFO: every regular file is reported
// once, in lexical order, with its own size, mode and mtime; and a file removed after
// the directory was listed gets its own error, in its own place.
func TestWalkOfManyFilesReportsEachFilesOwnFacts(t *testing.T) {
	dir := t.TempDir()
	const n = 3*statPerWorker + 7
	type facts struct {
		size    int64
		mode    os.FileMode
		mtimeNs int64
	}
	want := map[string]facts{}
	var order []string
	for i := range n {
		name := fmt.Sprintf("f%04d", i)
		mode := os.FileMode(0o600 | (i%2)*0o044)
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, i), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, name), mode); err != nil {
			t.Fatal(err)
		}
		mt := time.Unix(1_600_000_000+int64(i), int64(i))
		if err := os.Chtimes(filepath.Join(dir, name), mt, mt); err != nil {
			t.Fatal(err)
		}
		want[name] = facts{int64(i), mode, mt.UnixNano()}
		order = append(order, name)
	}
	if err := os.Mkdir(filepath.Join(dir, "f0100x"), 0o755); err != nil { // sorts among the files
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f0100x", "inner"), []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("f0005", filepath.Join(dir, "f0200link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("nothing", filepath.Join(dir, "f0300dangling")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "f0400fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	want["f0100x/inner"] = facts{3, 0o600, 0}
	want["f0200link"] = want["f0005"]
	order = append(order, "f0100x/inner", "f0200link")
	sort.Strings(order)

	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	var got []string
	skipped := map[string]string{}
	err = Walk(root, ".", func(f File) error {
		got = append(got, f.Path)
		w, ok := want[f.Path]
		if !ok {
			t.Errorf("reported %s, which is not a regular file of the tree", f.Path)
			return nil
		}
		if f.Size != w.size || f.Mode != w.mode || (w.mtimeNs != 0 && f.MtimeNs != w.mtimeNs) {
			t.Errorf("%s: size %d mode %v mtime %d, want %d %v %d", f.Path, f.Size, f.Mode, f.MtimeNs, w.size, w.mode, w.mtimeNs)
		}
		return nil
	}, func(p, why string) { skipped[p] = why }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, order) {
		t.Fatalf("walked %d paths, want %d in lexical order; first difference at %d", len(got), len(order), firstDifference(got, order))
	}
	if len(skipped) != 2 || skipped["f0300dangling"] == "" || skipped["f0400fifo"] == "" {
		t.Fatalf("skipped %v, want the dangling symlink and the FIFO", skipped)
	}

	// A file removed between the listing and its lstat.
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "f0500")); err != nil {
		t.Fatal(err)
	}
	infos := statRegular(entries)
	for i, e := range entries {
		switch {
		case e.Name() == "f0500":
			if !errors.Is(infos[i].err, fs.ErrNotExist) {
				t.Errorf("the removed file's lstat: %v, want ErrNotExist", infos[i].err)
			}
		case e.Type().IsRegular():
			if infos[i].err != nil || infos[i].fi.Name() != e.Name() {
				t.Errorf("entry %s got the facts of %v (%v)", e.Name(), infos[i].fi, infos[i].err)
			}
		case infos[i] != (entryInfo{}):
			t.Errorf("entry %s, not a regular file, was looked at", e.Name())
		}
	}
}

func firstDifference(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
