package journal

import (
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dtnflow/dtnflow/agent/fsname"
)

func TestRanges(t *testing.T) {
	var r Ranges
	for _, x := range [][2]int64{{5, 7}, {0, 2}, {2, 3}, {10, 12}, {6, 11}} {
		r.Add(x[0], x[1])
	}
	want := Ranges{{0, 3}, {5, 12}}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("ranges %v, want %v", r, want)
	}
	if !r.Contains(11) || r.Contains(3) || r.Count() != 10 {
		t.Fatalf("Contains/Count wrong on %v", r)
	}
}

func TestUnionOfWritersAndTornTail(t *testing.T) {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	w1, err := Create(root, "job", "a.log")
	if err != nil {
		t.Fatal(err)
	}
	w2, _ := Create(root, "job", "b.log")
	k := Key{Path: "d/big", Size: 100, MtimeNs: 7}
	w1.Append(Record{Kind: KindBlocks, Path: fsname.Path(k.Path), Size: k.Size, MtimeNs: k.MtimeNs, ChunkSize: 50, Index: 0, BlockSize: 10, Ranges: [][2]int64{{0, 2}}})
	w1.Append(Record{Kind: KindChunk, Path: fsname.Path(k.Path), Size: k.Size, MtimeNs: k.MtimeNs, ChunkSize: 50, Index: 1, BlockSize: 10})
	w2.Append(Record{Kind: KindBlocks, Path: fsname.Path(k.Path), Size: k.Size, MtimeNs: k.MtimeNs, ChunkSize: 50, Index: 0, BlockSize: 10, Ranges: [][2]int64{{2, 4}}})
	if err := w1.Sync(); err != nil {
		t.Fatal(err)
	}
	w2.Sync()
	// A torn record at the end of b.log: a length and half a body.
	f, _ := os.OpenFile(filepath.Join(dir, JobDir("job"), "b.log"), os.O_APPEND|os.O_WRONLY, 0)
	f.Write([]byte{0, 0, 0, 40, 1, 2, 3, 4, '{', '"'})
	f.Close()

	s := NewState(root, "job")
	if err := s.Refresh(); err != nil {
		t.Fatal(err)
	}
	fs := s.File(k)
	if fs == nil || !fs.Chunks[1].Verified || fs.Chunks[0].Verified {
		t.Fatalf("state %+v: want chunk 1 verified, chunk 0 not", fs)
	}
	if !reflect.DeepEqual(fs.Chunks[0].Have, Ranges{{0, 4}}) {
		t.Fatalf("chunk 0 has %v, want the union [0,4)", fs.Chunks[0].Have)
	}
	if s.File(Key{Path: k.Path, Size: 101, MtimeNs: 7}) != nil {
		t.Fatal("a record matched a different version of the file")
	}
	// Appends after the first read are picked up by the next Refresh.
	w1.Append(Record{Kind: KindFinal, Path: fsname.Path(k.Path), Size: k.Size, MtimeNs: k.MtimeNs, Mode: 0o640})
	w1.Sync()
	s.Refresh()
	if fs := s.File(k); !fs.Final || fs.Mode != 0o640 {
		t.Fatalf("final record not seen: %+v", fs)
	}
}

// A file the state owns is read no more after Own: what its writer makes durable it
// applies itself; another process's file is still read.
func TestRefreshSkipsTheFileItOwns(t *testing.T) {
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	mine, _ := Create(root, "job", "mine.log")
	other, _ := Create(root, "job", "other.log")
	final := func(p string) Record {
		return Record{Kind: KindFinal, Path: fsname.Path(p), Size: 1, MtimeNs: 2}
	}
	mine.Append(final("before"))
	mine.Sync()
	s := NewState(root, "job")
	s.Refresh() // what a file held before this process owned it is read once
	s.Own("mine.log")
	mine.Append(final("written"))
	mine.Sync()
	other.Append(final("theirs"))
	other.Sync()
	s.Refresh()
	for p, want := range map[string]bool{"before": true, "written": false, "theirs": true} {
		if got := s.File(final(p).Key()) != nil; got != want {
			t.Errorf("after Refresh, %s known: %v, want %v", p, got, want)
		}
	}
	s.Apply(final("written"))
	if s.File(final("written").Key()) == nil {
		t.Error("an owned record applied by its writer is not known")
	}
}

// TestRefreshPassesOverWhatIsNotAJournal: a FIFO at a journal's name, or at the job's
// journal directory, would hold an open for reading until a writer came, and the
// receiver with it. Refresh reads the journals beside the FIFO and passes over it, and
// refuses a job directory that is not a directory, at once either way.
func TestRefreshPassesOverWhatIsNotAJournal(t *testing.T) {
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	w, _ := Create(root, "job", "good.log")
	w.Append(Record{Kind: KindFinal, Path: "a", Size: 1, MtimeNs: 2})
	w.Sync()
	if err := syscall.Mkfifo(path.Join(root.Name(), JobDir("job"), "planted.log"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path.Join(root.Name(), JobDir("fifo-job")), 0o600); err != nil {
		t.Fatal(err)
	}
	s, other := NewState(root, "job"), NewState(root, "fifo-job")
	done := make(chan [2]error)
	go func() { done <- [2]error{s.Refresh(), other.Refresh()} }()
	select {
	case errs := <-done:
		if errs[0] != nil {
			t.Errorf("Refresh beside a FIFO: %v", errs[0])
		}
		if errs[1] == nil || !strings.Contains(errs[1].Error(), "not a directory") {
			t.Errorf("Refresh of a job directory that is a FIFO: %v, want it refused", errs[1])
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Refresh waits on a FIFO")
	}
	if s.File(Record{Kind: KindFinal, Path: "a", Size: 1, MtimeNs: 2}.Key()) == nil {
		t.Error("the journal beside the FIFO was not read")
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte{0, 0, 0, 2, 0, 0, 0, 0, '{', '}'})
	f.Fuzz(func(t *testing.T, data []byte) {
		n := Decode(data, func(Record) {})
		if n < 0 || n > len(data) {
			t.Fatalf("Decode used %d of %d bytes", n, len(data))
		}
	})
}

// TestLostForgetsTheFinalFile: a file made final, then lost at the destination and
// received again — the lost record forgets that it was final and its old chunks, so
// that the new run's chunks, and only they, count.
func TestLostForgetsTheFinalFile(t *testing.T) {
	k := Key{Path: "d/big.bin", Size: 3 << 20, MtimeNs: 42}
	rec := func(kind string, index int32) Record {
		return Record{Kind: kind, Path: fsname.Path(k.Path), Size: k.Size, MtimeNs: k.MtimeNs, ChunkSize: 1 << 20, Index: index, BlockSize: 1 << 16}
	}
	s := &State{files: map[Key]*FileState{}}
	s.Apply(rec(KindChunk, 0), rec(KindChunk, 1), rec(KindChunk, 2), Record{Kind: KindFinal, Path: fsname.Path(k.Path), Size: k.Size, MtimeNs: k.MtimeNs, Run: "1"})
	if fs := s.File(k); !fs.Final || len(fs.Chunks) != 3 {
		t.Fatalf("after run 1: %+v, want final with 3 chunks", fs)
	}
	s.Apply(rec(KindLost, 0), rec(KindChunk, 2))
	fs := s.File(k)
	if fs.Final || fs.Run != "" || len(fs.Chunks) != 1 || fs.Chunks[2] == nil || !fs.Chunks[2].Verified {
		t.Fatalf("lost, then chunk 2 again: %+v, want not final, only chunk 2 verified", fs)
	}
	s.Apply(rec(KindChunk, 0), rec(KindChunk, 1), Record{Kind: KindFinal, Path: fsname.Path(k.Path), Size: k.Size, MtimeNs: k.MtimeNs, Run: "2"})
	if fs := s.File(k); !fs.Final || fs.Run != "2" {
		t.Fatalf("after run 2: %+v, want final by run 2", fs)
	}
}
