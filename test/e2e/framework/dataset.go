package framework

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/dtnflow/dtnflow/test/dataset"
)

// File is one file of a generated dataset, by path relative to the dataset's folder.
type File struct {
	Path string
	Size int64
}

// DatasetSpec describes a mixed dataset: a few large files, some medium ones and many
// small ones spread over nested folders, plus empty files — the shapes whose size
// classes the planner treats differently (Arslan & Kosar).
type DatasetSpec struct {
	// Seed makes the names, sizes and contents repeatable.
	Seed uint64
	// Large files of LargeBytes each (one byte more for every other one, so that no
	// size is a round number of blocks).
	Large      int
	LargeBytes int64
	// Medium files of 1–8 MiB.
	Medium int
	// Small files of 1 KiB – 256 KiB, log-uniform.
	Small int
	// Empty files.
	Empty int
	// VariedMetadata gives the files different permission bits (0600, 0640, 0644,
	// 0755, 0444) and modification times in the past with nanoseconds, so that a copy
	// that keeps neither is told from one that does.
	VariedMetadata bool
}

// Files lists the dataset's files.
func (s DatasetSpec) Files() []File {
	r := rand.New(rand.NewPCG(s.Seed, 0x5eed))
	var files []File
	for i := 0; i < s.Large; i++ {
		files = append(files, File{Path: fmt.Sprintf("large/run-%03d.h5", i), Size: s.LargeBytes + int64(i%2)})
	}
	for i := 0; i < s.Medium; i++ {
		files = append(files, File{Path: fmt.Sprintf("medium/chunk-%03d.dat", i), Size: 1<<20 + r.Int64N(7<<20)})
	}
	for i := 0; i < s.Small; i++ {
		size := int64(math.Exp(math.Log(1<<10) + r.Float64()*(math.Log(256<<10)-math.Log(1<<10))))
		files = append(files, File{Path: fmt.Sprintf("small/%02d/%02d/event-%05d.json", i%7, i%5, i), Size: size})
	}
	for i := 0; i < s.Empty; i++ {
		files = append(files, File{Path: fmt.Sprintf("small/empty-%02d", i), Size: 0})
	}
	return files
}

// Bytes is the dataset's total size.
func (s DatasetSpec) Bytes() int64 {
	var n int64
	for _, f := range s.Files() {
		n += f.Size
	}
	return n
}

// Write creates the dataset under dir (which must not exist yet) with pseudo-random,
// incompressible contents.
func (s DatasetSpec) Write(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("dataset folder %s exists already", dir)
	}
	buf := make([]byte, 1<<20)
	for i, f := range s.Files() {
		path := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		out, err := os.Create(path)
		if err != nil {
			return err
		}
		content := rand.NewChaCha8(seedFor(s.Seed, uint64(i)))
		for left := f.Size; left > 0; {
			n := min(left, int64(len(buf)))
			_, _ = content.Read(buf[:n])
			if _, err := out.Write(buf[:n]); err != nil {
				out.Close()
				return err
			}
			left -= n
		}
		if err := out.Close(); err != nil {
			return err
		}
		if s.VariedMetadata {
			modes := []os.FileMode{0o600, 0o640, 0o644, 0o755, 0o444}
			if err := os.Chmod(path, modes[i%len(modes)]); err != nil {
				return err
			}
			mtime := time.Date(2019, 3, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i)*time.Hour + time.Duration(1+i*7919)*time.Nanosecond)
			if err := os.Chtimes(path, mtime, mtime); err != nil {
				return err
			}
		}
	}
	return nil
}

func seedFor(seed, i uint64) [32]byte {
	var k [32]byte
	for b := 0; b < 8; b++ {
		k[b] = byte(seed >> (8 * b))
		k[8+b] = byte(i >> (8 * b))
	}
	return k
}

// FileState is what the chaos checks compare of a file: its bytes (SHA-256), owner,
// permission bits and modification time.
type FileState struct {
	Size    int64
	SHA256  string
	UID     uint32
	GID     uint32
	Mode    fs.FileMode
	MtimeNs int64
}

// Tree is the state of every regular file under a folder, by slash-separated path
// relative to it. Nothing is skipped: journals and temporaries are for the caller to
// judge (TempFiles, JournalFiles).
type Tree map[string]FileState

// ReadTree reads the state of every regular file under dir. Other entries (folders,
// symbolic links) are not listed; a folder that does not exist is an empty tree.
func ReadTree(dir string) (Tree, error) {
	tree := Tree{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) && path == dir {
				return filepath.SkipDir
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		st, err := stateOf(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		tree[filepath.ToSlash(rel)] = st
		return nil
	})
	return tree, err
}

func stateOf(path string) (FileState, error) {
	f, err := os.Open(path)
	if err != nil {
		return FileState{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return FileState{}, err
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return FileState{}, err
	}
	st := FileState{Size: fi.Size(), SHA256: hex.EncodeToString(h.Sum(nil)), Mode: fi.Mode().Perm(), MtimeNs: fi.ModTime().UnixNano()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.UID, st.GID = sys.Uid, sys.Gid
	}
	return st, nil
}

// IsTemporary says whether a path (relative, slash-separated) is an agent's temporary
// file (a hidden name ending in .dtnpart) or lies in a journal folder (.dtnflow).
func IsTemporary(rel string) bool {
	for _, part := range strings.Split(rel, "/") {
		if part == ".dtnflow" || (strings.HasPrefix(part, ".") && strings.HasSuffix(part, ".dtnpart")) {
			return true
		}
	}
	return false
}

// CompareTrees describes every difference between a source tree and its copy: a file
// missing, one the source does not have, and for each file present in both a different
// size, SHA-256, owner, mode or mtime. With partial, files missing at the destination
// are allowed (a job that failed part way) but anything present must be right.
// Temporaries (IsTemporary) at the destination are left to the caller. It returns the
// differences, sorted, and the number of files compared.
func CompareTrees(source, destination Tree, partial bool) ([]string, int) {
	var diffs []string
	compared := 0
	for path, s := range source {
		d, ok := destination[path]
		if !ok {
			if !partial {
				diffs = append(diffs, "missing at the destination: "+path)
			}
			continue
		}
		compared++
		var what []string
		if d.Size != s.Size {
			what = append(what, fmt.Sprintf("size %d, source %d", d.Size, s.Size))
		}
		if d.SHA256 != s.SHA256 {
			what = append(what, fmt.Sprintf("sha256 %.12s, source %.12s", d.SHA256, s.SHA256))
		}
		if d.UID != s.UID || d.GID != s.GID {
			what = append(what, fmt.Sprintf("owner %d:%d, source %d:%d", d.UID, d.GID, s.UID, s.GID))
		}
		if d.Mode != s.Mode {
			what = append(what, fmt.Sprintf("mode %v, source %v", d.Mode, s.Mode))
		}
		if d.MtimeNs != s.MtimeNs {
			what = append(what, fmt.Sprintf("mtime %d, source %d", d.MtimeNs, s.MtimeNs))
		}
		if len(what) > 0 {
			diffs = append(diffs, fmt.Sprintf("different at the destination: %s (%s)", path, strings.Join(what, "; ")))
		}
	}
	for path := range destination {
		if _, ok := source[path]; !ok && !IsTemporary(path) {
			diffs = append(diffs, "not in the source: "+path)
		}
	}
	sort.Strings(diffs)
	return diffs, compared
}

// WrongOwners lists every file and directory under dir (the agents' journals left out)
// that does not belong to uid:gid, at most 20 of them, or returns nil.
func WrongOwners(dir string, uid, gid int64) ([]string, error) {
	var wrong []string
	err := dataset.WalkOutsideJournals(dir, func(path string, d fs.DirEntry) error {
		info, err := d.Info()
		if err != nil {
			return err
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%s: no owner in its stat", path)
		}
		if int64(st.Uid) != uid || int64(st.Gid) != gid {
			if len(wrong) < 20 {
				rel, _ := filepath.Rel(dir, path)
				wrong = append(wrong, fmt.Sprintf("%s is %d:%d", filepath.ToSlash(rel), st.Uid, st.Gid))
			}
		}
		return nil
	})
	return wrong, err
}
