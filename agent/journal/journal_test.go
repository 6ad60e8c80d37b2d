package journal

import (
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
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

// TestRecordsApplyInTheOrderTheyWereWritten: a job's journals are one file per
// receiver process, read in the order of their names. A run this morning made a file
// final through stripe 1's receiver (z-s1.log); the file was deleted at the
// destination; tonight's run found it gone (lost), sent it again and made it final
// through stripe 0's receiver (a-s0.log). Read a-s0 then z-s1, the morning's final
// record came last and stood: the final check then found "another writer's version"
// at the final name — the inode of tonight's file where the journal named the
// morning's (make test's chaos step, seed 738763558, failed that way three times in a
// row). Each record now applies in the order it was written: tonight's final record
// stands, the morning's blocks of a temporary file the rename consumed are not
// counted again, and a record from a receiver older than the stamp (no time) counts
// as older than every stamped one.
func TestRecordsApplyInTheOrderTheyWereWritten(t *testing.T) {
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	final := Key{Path: "medium/chunk-002.dat", Size: 4574537, MtimeNs: 1551416400000039596}
	partial := Key{Path: "large/run-000.h5", Size: 8 << 20, MtimeNs: 1551398400000000001}
	rec := func(k Key, kind string, at int64) Record {
		return Record{Kind: kind, Path: fsname.Path(k.Path), Size: k.Size, MtimeNs: k.MtimeNs, ChunkSize: 64 << 20, BlockSize: 1 << 20, At: at}
	}
	morning, tonight := time.Date(2026, 12, 3, 8, 26, 0, 0, time.UTC).UnixNano(), time.Date(2026, 12, 3, 20, 21, 0, 0, time.UTC).UnixNano()
	older, _ := Create(root, "job", "z-s1.log")
	newer, _ := Create(root, "job", "a-s0.log")
	morningFinal := rec(final, KindFinal, morning)
	morningFinal.Ino, morningFinal.Run = 5328710, "morning"
	untimedFinal := rec(final, KindFinal, 0) // a receiver older than Record.At
	untimedFinal.Ino, untimedFinal.Run = 99, "older-receiver"
	morningBlocks := rec(partial, KindBlocks, morning)
	morningBlocks.Ranges = [][2]int64{{0, 6}}
	older.Append(morningFinal, morningBlocks)
	appendUnstamped(t, root, "job", "m-old.log", untimedFinal)
	tonightFinal := rec(final, KindFinal, tonight+2)
	tonightFinal.Ino, tonightFinal.Run = 5327274, "tonight"
	tonightBlocks := rec(partial, KindBlocks, tonight+1)
	tonightBlocks.Ranges = [][2]int64{{0, 1}}
	newer.Append(rec(final, KindLost, tonight), rec(partial, KindLost, tonight), tonightBlocks, tonightFinal)
	if err := older.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := newer.Sync(); err != nil {
		t.Fatal(err)
	}

	s := NewState(root, "job")
	if err := s.Refresh(); err != nil {
		t.Fatal(err)
	}
	if fs := s.File(final); fs == nil || !fs.Final || fs.Ino != 5327274 || fs.Run != "tonight" {
		t.Fatalf("state of the file made final twice: %+v, want final by tonight's run (inode 5327274)", fs)
	}
	if fs := s.File(partial); fs == nil || fs.Final || len(fs.Chunks) != 1 || !reflect.DeepEqual(fs.Chunks[0].Have, Ranges{{0, 1}}) {
		t.Fatalf("state of the file lost and begun again: %+v, want only tonight's block [0,1)", fs)
	}
	// Applied the other way round (the newest first, as when a file is appended to
	// after the first read), the same two final records end in the same state.
	s2 := NewState(root, "job")
	s2.Apply(tonightFinal)
	s2.Apply(morningFinal)
	if fs := s2.File(final); !fs.Final || fs.Ino != 5327274 {
		t.Fatalf("applied newest first: %+v, want tonight's final record to stand", fs)
	}
}

// appendUnstamped writes records as a receiver older than Record.At did: without a
// time.
func appendUnstamped(t *testing.T, root *os.Root, job, name string, recs ...Record) {
	t.Helper()
	var buf []byte
	for _, r := range recs {
		b, _ := json.Marshal(r)
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(b)))
		buf = binary.BigEndian.AppendUint32(buf, crc32.Update(0, castagnoli, b))
		buf = append(buf, b...)
	}
	if err := root.WriteFile(path.Join(JobDir(job), name), buf, 0o600); err != nil {
		t.Fatal(err)
	}
}
