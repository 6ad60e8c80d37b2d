package mover

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dtnflow/dtnflow/agent/journal"
	"github.com/dtnflow/dtnflow/agent/wire"
)

// TestResumedChunkFailingToCommitAnswersItsOpen: a file whose only chunk an earlier
// receiver verified but did not rename is finished by the committer when a sender
// opens the chunk again. When the commit fails (here the journal cannot be written),
// the sender still hears back on the ChunkOpened it waits for, with the error, and the
// file does not take its final name. The committer answered with a Result for unit 0
// instead, which the sender had not asked for, and the sender waited until its
// session ended.
func TestResumedChunkFailingToCommitAnswersItsOpen(t *testing.T) {
	addr, dir, rcv := startReceiverWith(t)
	const job, name, size, mtime = "evil-job", "resumed", 1 << 20, int64(1e18)
	root, err := os.OpenRoot(filepath.Join(dir, "root"))
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	earlier, err := journal.Create(root, job, "earlier.log")
	if err != nil {
		t.Fatal(err)
	}
	earlier.Append(journal.Record{Kind: journal.KindChunk, Path: name, Size: size, MtimeNs: mtime, ChunkSize: size, BlockSize: size, Digest: "00"})
	if err := earlier.Sync(); err != nil {
		t.Fatal(err)
	}
	earlier.Close()
	if err := root.WriteFile(TempName(name, job), make([]byte, size), 0o600); err != nil {
		t.Fatal(err)
	}

	h := connect(t, addr) // the session of job evil-job opens the job's journal
	rcv.mu.Lock()
	rcv.jobs[job].journal.Close() // what the committer journals next fails to be written
	rcv.mu.Unlock()
	h.ctrlW.WriteJSON(wire.TypeChunkOpen, wire.ChunkOpen{ID: 5, Path: name, FileSize: size, MtimeNs: mtime, Mode: 0o644,
		Index: 0, Chunks: 1, Length: size, ChunkSize: size, BlockSize: size})
	var op wire.ChunkOpened
	if err := wire.DecodeJSON(h.expect(wire.TypeChunkOpened), &op); err != nil {
		t.Fatal(err)
	}
	if op.ID != 5 || op.Verified || !strings.Contains(op.Error, "journal") {
		t.Errorf("ChunkOpened %+v, want chunk 5 not verified, with the journal's error", op)
	}
	if _, err := root.Lstat(name); err == nil {
		t.Errorf("%s took its final name though its commit failed", name)
	}
}
