package mover

import (
	"strings"
	"testing"

	"github.com/dtnflow/dtnflow/agent/fsname"
	"github.com/dtnflow/dtnflow/agent/wire"
)

func TestCheckChunkOpen(t *testing.T) {
	const bs, cs = 1 << 20, 4 << 20
	good := wire.ChunkOpen{FileSize: 10 << 20, Chunks: 3, Index: 2, Offset: 8 << 20, Length: 2 << 20, ChunkSize: cs, BlockSize: bs}
	if err := checkChunkOpen(good, bs, cs, DefaultMaxFileSize); err != nil {
		t.Fatalf("a well-formed chunk refused: %v", err)
	}
	cases := map[string]func(m *wire.ChunkOpen){
		"offset and length 2^62 (their sum overflows)": func(m *wire.ChunkOpen) { m.Offset, m.Length = 1<<62, 1<<62 },
		"offset 2^40 in a 10 MiB file":                 func(m *wire.ChunkOpen) { m.Offset = 1 << 40 },
		"file over the largest accepted":               func(m *wire.ChunkOpen) { m.FileSize, m.Chunks = DefaultMaxFileSize+1, 1<<22+1 },
		"file size near MaxInt64":                      func(m *wire.ChunkOpen) { m.FileSize = 1<<63 - 1 },
		"negative offset":                              func(m *wire.ChunkOpen) { m.Offset = -1 },
		"length past the end":                          func(m *wire.ChunkOpen) { m.Length = 3 << 20 },
		"length short of the chunk":                    func(m *wire.ChunkOpen) { m.Index, m.Offset, m.Length = 0, 0, 1<<20 },
		"offset not the index's":                       func(m *wire.ChunkOpen) { m.Offset = 7 << 20 },
		"index past the chunks":                        func(m *wire.ChunkOpen) { m.Index = 3 },
		"negative index":                               func(m *wire.ChunkOpen) { m.Index = -1 },
		"chunk count wrong":                            func(m *wire.ChunkOpen) { m.Chunks = 4 },
		"zero chunks":                                  func(m *wire.ChunkOpen) { m.Chunks, m.Index = 0, 0 },
		"block size over the session's":                func(m *wire.ChunkOpen) { m.BlockSize = 2 * bs },
		"zero block size":                              func(m *wire.ChunkOpen) { m.BlockSize = 0 },
		"chunk not a multiple of blocks":               func(m *wire.ChunkOpen) { m.ChunkSize = cs + 1 },
		"chunk size not the session's":                 func(m *wire.ChunkOpen) { m.ChunkSize = 2 * cs },
		"empty file":                                   func(m *wire.ChunkOpen) { m.FileSize = 0 },
	}
	for name, mutate := range cases {
		m := good
		mutate(&m)
		if err := checkChunkOpen(m, bs, cs, DefaultMaxFileSize); err == nil {
			t.Errorf("%s: accepted %+v", name, m)
		}
	}
}

// FuzzCheckChunkOpen: whatever a peer announces, an accepted chunk lies inside a file
// no larger than the limit, and its blocks fit it.
func FuzzCheckChunkOpen(f *testing.F) {
	f.Add(int64(10<<20), int32(3), int32(2), int64(8<<20), int64(2<<20), int64(4<<20), int64(1<<20))
	f.Add(int64(1<<62), int32(1), int32(0), int64(1<<62), int64(1<<62), int64(1<<20), int64(1<<20))
	f.Fuzz(func(t *testing.T, size int64, chunks, index int32, off, length, cs, bs int64) {
		m := wire.ChunkOpen{FileSize: size, Chunks: chunks, Index: index, Offset: off, Length: length, ChunkSize: cs, BlockSize: bs}
		if checkChunkOpen(m, 1<<20, 0, DefaultMaxFileSize) != nil {
			return
		}
		if size > DefaultMaxFileSize || off < 0 || length <= 0 || off > size-length || bs <= 0 || bs > 1<<20 {
			t.Fatalf("accepted %+v", m)
		}
	})
}

func TestWirePathRefusesTheJournal(t *testing.T) {
	for _, p := range []string{".dtnflow", ".dtnflow/job/x.log", "./.dtnflow/a", "a/../.dtnflow/b"} {
		if _, err := wirePath(fsname.Path(p)); err == nil {
			t.Errorf("%q accepted", p)
		}
	}
	for _, p := range []string{".dtnflowrc", "d/.dtnflow/x", ".dtnflow2/y"} {
		if got, err := wirePath(fsname.Path(p)); err != nil || !strings.HasSuffix(p, got) {
			t.Errorf("%q: %q, %v", p, got, err)
		}
	}
}

// TestConfinedReceiverRefusesOtherPaths checks that a confined receiver takes paths at
// and under its directory only, however a sender spells one that leaves it.
func TestConfinedReceiverRefusesOtherPaths(t *testing.T) {
	r := &Receiver{Confine: "incoming/site-a"}
	for _, p := range []string{"incoming/site-a/x.bin", "incoming/site-a", "incoming/site-a/d/e/f", "./incoming/site-a/y"} {
		if _, err := r.destinationPath(fsname.Path(p)); err != nil {
			t.Errorf("%q refused: %v", p, err)
		}
	}
	for _, p := range []string{"incoming/site-ab/x", "incoming/x", "etc/passwd", "incoming"} {
		if _, err := r.destinationPath(fsname.Path(p)); err == nil || !strings.Contains(err.Error(), "writes only under incoming/site-a") {
			t.Errorf("%q: %v, want it refused as outside incoming/site-a", p, err)
		}
	}
	if _, err := r.destinationPath("incoming/site-a/../other/x"); err == nil {
		t.Errorf("a '..' out of the confinement accepted")
	}
	if got, err := (&Receiver{}).destinationPath("any/where"); err != nil || got != "any/where" {
		t.Errorf("unconfined: %q, %v", got, err)
	}
}
