// Package fsroot keeps every path an agent touches under its root. A path from a flag,
// a coordinator or the wire is first checked lexically (Clean: no absolute path, no
// '..'), then opened through os.Root, which refuses symlinks that lead outside the
// root even if the tree changes under us. Errors name the path.
package fsroot

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/dtnflow/dtnflow/agent/parallel"
)

// JournalDir is the directory at the top of a root that holds receivers' journals
// (package journal); Walk leaves it out.
const JournalDir = ".dtnflow"

// ErrEscape marks a path refused because it leads outside the root.
var ErrEscape = errors.New("leads outside the root")

// Clean checks that p is a relative path with no '..' segment and returns it in clean
// form ("." for the root itself when allowRoot).
func Clean(p string, allowRoot bool) (string, error) {
	switch {
	case p == "" && allowRoot:
		return ".", nil
	case p == "":
		return "", fmt.Errorf("empty path refused")
	case strings.ContainsRune(p, 0):
		return "", fmt.Errorf("path %q refused: contains a NUL byte", p)
	case strings.HasPrefix(p, "/"):
		return "", fmt.Errorf("path %q refused: absolute paths are not allowed, give it relative to the root: %w", p, ErrEscape)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return "", fmt.Errorf("path %q refused: '..' is not allowed: %w", p, ErrEscape)
		}
	}
	c := path.Clean(p)
	if c == "." && !allowRoot {
		return "", fmt.Errorf("path %q refused: names the root itself", p)
	}
	return c, nil
}

// escapes says whether an os.Root error is its refusal of a path leading outside.
func escapes(err error) bool {
	return strings.Contains(err.Error(), "escapes from parent") || errors.Is(err, ErrEscape)
}

// Explain turns an os.Root error into one that names the path and says why.
func Explain(p string, err error) error {
	if err == nil {
		return nil
	}
	if escapes(err) {
		return fmt.Errorf("path %q refused: a symlink leads outside the root: %w", p, ErrEscape)
	}
	return err
}

// MtimeNs is fi's modification time in nanoseconds since the epoch, the form every
// frame and journal record carries it in. An int64 of nanoseconds spans 1677-09-21 to
// 2262-04-11; a file system can hold times beyond (ext4 to 2446, and a clock set wrong
// writes them), where time.UnixNano's result is undefined — a different instant,
// which the destination then got and the final check found changed. Such a time is
// carried as the nearest instant the span holds, the same at every reading of the
// file, and the destination file gets that instant.
func MtimeNs(fi fs.FileInfo) int64 {
	t := fi.ModTime()
	switch {
	case t.Before(minMtime):
		return math.MinInt64
	case t.After(maxMtime):
		return math.MaxInt64
	}
	return t.UnixNano()
}

var minMtime, maxMtime = time.Unix(0, math.MinInt64), time.Unix(0, math.MaxInt64)

// File is a regular file found by Walk.
type File struct {
	Path    string // relative to the root
	Size    int64
	Mode    fs.FileMode
	MtimeNs int64
}

// Walk lists the regular files at or under rel, in lexical order. Symlinks to files
// under the root are followed (the file's content is moved); a symlink that leads
// outside the root is an error naming it; symlinked directories are not descended
// (they could loop), and symlinks to nothing (a dangling link, a loop), like anything
// that is not a regular file, are reported by skipped.
//
// A directory that cannot be listed, or an entry that cannot be looked at (permission
// denied, gone since its directory was read), is given to unreadable with the error:
// when it returns nil the walk goes on without it, else its error ends the walk. A nil
// unreadable ends the walk with the error.
func Walk(root *os.Root, rel string, fn func(File) error, skipped func(path, why string), unreadable func(path string, err error) error) error {
	rel, err := Clean(rel, true)
	if err != nil {
		return err
	}
	if rel == JournalDir || strings.HasPrefix(rel, JournalDir+"/") {
		return fmt.Errorf("path %q refused: %s/ holds the receivers' journals, never data", rel, JournalDir)
	}
	fi, err := root.Stat(rel)
	if err != nil {
		return Explain(rel, err)
	}
	w := &walker{root: root, fn: fn, skipped: skipped, unreadable: unreadable}
	if !fi.IsDir() {
		if !fi.Mode().IsRegular() {
			skipped(rel, "not a regular file")
			return nil
		}
		return fn(File{Path: rel, Size: fi.Size(), Mode: fi.Mode().Perm(), MtimeNs: MtimeNs(fi)})
	}
	return w.dir(rel)
}

type walker struct {
	root       *os.Root
	fn         func(File) error
	skipped    func(path, why string)
	unreadable func(path string, err error) error
}

// cannot hands a path the walk could not read to unreadable; a path leading outside
// the root is always an error.
func (w *walker) cannot(p string, err error) error {
	err = Explain(p, err)
	if w.unreadable == nil || errors.Is(err, ErrEscape) {
		return err
	}
	return w.unreadable(p, err)
}

// entryInfo is an entry's Info, taken ahead of the walk's loop.
type entryInfo struct {
	fi  fs.FileInfo
	err error
}

// statRegular takes the Info (an lstat) of each regular file among entries, on every
// core when there are many: the walk of a directory of small files is one lstat per
// file, and it is all a standalone send does before its first connection, while the
// other cores wait (2000 files: about 4 ms of lstat on this machine's cores). The
// slice is indexed like entries; other entries' places stay empty.
func statRegular(entries []fs.DirEntry) []entryInfo {
	infos := make([]entryInfo, len(entries))
	parallel.Each(len(entries), statPerWorker, func(i int) {
		if e := entries[i]; e.Type().IsRegular() {
			infos[i].fi, infos[i].err = e.Info()
		}
	})
	return infos
}

// statPerWorker is the fewest entries worth a goroutine of statRegular.
const statPerWorker = 256

func (w *walker) dir(dir string) error {
	root, fn, skipped := w.root, w.fn, w.skipped
	d, err := root.Open(dir)
	if err != nil {
		return w.cannot(dir, err)
	}
	entries, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return w.cannot(dir, fmt.Errorf("listing %q: %w", dir, err))
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	infos := statRegular(entries)
	for i, e := range entries {
		p := path.Join(dir, e.Name())
		if dir == "." && e.Name() == JournalDir && e.IsDir() {
			// The receivers' journals, when this root is also a destination: never
			// data, and said so.
			skipped(p, "the receivers' journal directory, reserved")
			continue
		}
		switch {
		case e.Type()&fs.ModeSymlink != 0:
			fi, err := root.Stat(p)
			switch {
			case err == nil:
			case errors.Is(err, fs.ErrNotExist) && !escapes(err):
				// Nothing to move, and nothing lost: a link left behind by what it named.
				skipped(p, "a symlink to nothing (its target does not exist)")
				continue
			case errors.Is(err, syscall.ELOOP):
				skipped(p, "a symlink loop")
				continue
			default:
				if err := w.cannot(p, err); err != nil {
					return err
				}
				continue
			}
			if fi.IsDir() {
				skipped(p, "symlinked directory not followed")
				continue
			}
			if !fi.Mode().IsRegular() {
				skipped(p, "not a regular file")
				continue
			}
			if err := fn(File{Path: p, Size: fi.Size(), Mode: fi.Mode().Perm(), MtimeNs: MtimeNs(fi)}); err != nil {
				return err
			}
		case e.IsDir():
			if err := w.dir(p); err != nil {
				return err
			}
		case e.Type().IsRegular():
			fi, err := infos[i].fi, infos[i].err
			if err != nil {
				if err := w.cannot(p, fmt.Errorf("stat %q: %w", p, err)); err != nil {
					return err
				}
				continue
			}
			if err := fn(File{Path: p, Size: fi.Size(), Mode: fi.Mode().Perm(), MtimeNs: MtimeNs(fi)}); err != nil {
				return err
			}
		default:
			skipped(p, "not a regular file")
		}
	}
	return nil
}
