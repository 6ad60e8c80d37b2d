package coord

import (
	"strings"
	"testing"

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/agent/fsname"
	"github.com/dtnflow/dtnflow/agent/wire"
)

// manifestOf is the manifest a receiver holding every file of the listing at its final
// name would send, passed through edit.
func manifestOf(c *Core, edit func([]wire.ManifestFile) []wire.ManifestFile) wire.Manifest {
	var files []wire.ManifestFile
	for _, f := range c.files {
		mf := wire.ManifestFile{Path: fsname.Path(f.dest), Size: f.f.Size, MtimeNs: f.f.MtimeNs, Digest: f.digest, ThisRun: true}
		if f.chunks > 1 {
			mf.Digest = ""
			for i := range f.chunks {
				mf.Chunks = append(mf.Chunks, f.chunkDigests[i])
			}
		}
		files = append(files, mf)
	}
	if edit != nil {
		files = edit(files)
	}
	return wire.Manifest{Files: files, Last: true}
}

// answerManifest plays the stripe's part of the final check: its next request asks
// for the manifest, and it sends the one edit makes.
func answerManifest(t *testing.T, c *Core, m *Member, edit func([]wire.ManifestFile) []wire.ManifestFile) {
	t.Helper()
	if c.Phase() != contract.PhaseTransferring {
		t.Fatalf("phase %s once every file is done, before the final check", c.Phase())
	}
	if g, ok := c.request(m, 10); !ok || !g.Manifest || len(g.Units) > 0 {
		t.Fatalf("the stripe was not asked for its manifest: %+v", g)
	}
	m.Manifest(manifestOf(c, edit))
}

// doneJob runs a job of small files a and b and a chunked file big to the final check,
// with source digests reported as the senders report them.
func doneJob(t *testing.T) (*Core, *Member) {
	t.Helper()
	c := newCore(t, map[string]int{"d/a": 10, "d/b": 20, "d/big": 700})
	m := c.Join(0)
	m.Summary(wire.Summary{Last: true})
	for c.Report().FilesDone < 3 {
		g := request(t, m, 10)
		var rs []wire.UnitResult
		for _, u := range g.Units {
			rs = append(rs, wire.UnitResult{ID: u.ID, OK: true, Digest: "src-" + string(u.Dest) + "-" + string(rune('0'+u.Index))})
		}
		m.Done(rs)
	}
	return c, m
}

func TestFinalCheck(t *testing.T) {
	cases := map[string]struct {
		edit func([]wire.ManifestFile) []wire.ManifestFile
		want []string // in the error; none: Complete
	}{
		"everything in place": {},
		"a file missing": {edit: func(fs []wire.ManifestFile) []wire.ManifestFile { return fs[1:] },
			want: []string{"out/d/a: no receiver holds it as final"}},
		"a file not at its final name": {edit: func(fs []wire.ManifestFile) []wire.ManifestFile {
			fs[0].Problem = "missing at its final name: lstat out/d/a: no such file or directory"
			return fs
		}, want: []string{"out/d/a: missing at its final name"}},
		"another version at the destination": {edit: func(fs []wire.ManifestFile) []wire.ManifestFile {
			fs[1].Size++
			return fs
		}, want: []string{"out/d/b: no receiver holds it as final"}},
		"a small file with another file's bytes": {edit: func(fs []wire.ManifestFile) []wire.ManifestFile {
			fs[0].Digest = fs[1].Digest
			return fs
		}, want: []string{"out/d/a: holds other bytes than the source"}},
		"a chunk with other bytes": {edit: func(fs []wire.ManifestFile) []wire.ManifestFile {
			fs[2].Chunks[1] = "forged"
			return fs
		}, want: []string{"out/d/big: chunk 1 holds other bytes"}},
		"a name this run wrote that the source does not have": {edit: func(fs []wire.ManifestFile) []wire.ManifestFile {
			extra := fs[0]
			extra.Path = "out/d/file0.txu"
			return append(fs, extra)
		}, want: []string{"out/d/file0.txu: made final by this run but not in the source listing"}},
		"an invalid UTF-8 name this run wrote": {edit: func(fs []wire.ManifestFile) []wire.ManifestFile {
			extra := fs[0]
			extra.Path = "out/d/bad\xfe"
			return append(fs, extra)
		}, want: []string{`"out/d/bad\xfe": made final by this run`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, m := doneJob(t)
			answerManifest(t, c, m, tc.edit)
			r := c.Report()
			if len(tc.want) == 0 {
				if r.Phase != contract.PhaseComplete {
					t.Fatalf("phase %s (%s), want Complete", r.Phase, r.Error)
				}
				if g, _ := c.request(m, 1); !g.Finished {
					t.Fatal("a finished job must tell its stripes")
				}
				return
			}
			if r.Phase != contract.PhaseFailed {
				t.Fatalf("phase %s, want Failed", r.Phase)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.Error, w) {
					t.Errorf("error %q does not say %q", r.Error, w)
				}
			}
			// and the report lists the rejected file by itself, path and reason apart
			if r.FilesFailed != int64(len(tc.want)) || len(r.FailedFiles) != len(tc.want) {
				t.Fatalf("filesFailed %d, failedFiles %+v: want %d", r.FilesFailed, r.FailedFiles, len(tc.want))
			}
			for i, w := range tc.want {
				if got := r.FailedFiles[i].String(); !strings.HasPrefix(got, w) {
					t.Errorf("failed file %q, want %q", got, w)
				}
			}
		})
	}
}

// TestFinalCheckUnionOfReceivers: each stripe's receiver may hold part of the
// destination; the check waits for every stripe and compares their union. A stripe
// that leaves before answering is not waited for.
func TestFinalCheckUnionOfReceivers(t *testing.T) {
	c, m0 := doneJob(t)
	m1, m2 := c.Join(1), c.Join(2)
	half := func(keep int) func([]wire.ManifestFile) []wire.ManifestFile {
		return func(fs []wire.ManifestFile) []wire.ManifestFile {
			var out []wire.ManifestFile
			for i, f := range fs {
				if i%2 == keep {
					out = append(out, f)
				}
			}
			return out
		}
	}
	answerManifest(t, c, m0, half(0))
	if c.Phase() != contract.PhaseTransferring {
		t.Fatalf("phase %s with two stripes still to answer", c.Phase())
	}
	if g, ok := c.request(m0, 1); ok || g.Manifest {
		t.Fatalf("a stripe that answered was asked again: %+v", g)
	}
	answerManifest(t, c, m1, half(1))
	if c.Phase() != contract.PhaseTransferring {
		t.Fatalf("phase %s with one stripe still to answer", c.Phase())
	}
	m2.Leave()
	if r := c.Report(); r.Phase != contract.PhaseComplete {
		t.Fatalf("phase %s (%s), want Complete on the union", r.Phase, r.Error)
	}
}
