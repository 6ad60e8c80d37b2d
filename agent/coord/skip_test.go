package coord

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/agent/mover"
	"github.com/dtnflow/dtnflow/agent/wire"
	"golang.org/x/sys/unix"
)

// runWithSourceFailure runs a job of the small files d/a and d/b and the chunked file
// d/big (three chunks) in which the first chunk of d/big, and with sourceToo the file
// d/a too, fail at the source; failure says what else fails. Every other unit is sent
// and verified. It returns the core and its stripe once every unit has an end.
func runWithSourceFailure(t *testing.T, sourceErrors string, failure wire.UnitResult) (*Core, *Member) {
	t.Helper()
	c := newCore(t, map[string]int{"d/a": 10, "d/b": 20, "d/big": 700})
	c.opts.SourceErrors = sourceErrors
	m := c.Join(0)
	m.Summary(wire.Summary{Last: true})
	failedBig := false
	for range 20 {
		g, ok := c.request(m, 1)
		if !ok || g.Finished || g.Manifest {
			break
		}
		var rs []wire.UnitResult
		for _, u := range g.Units {
			switch {
			case u.Dest == "out/d/big" && !failedBig:
				failedBig = true
				rs = append(rs, wire.UnitResult{ID: u.ID, Error: "source file changed while it was read: d/big", Source: true})
			case u.Dest == "out/d/a" && failure.Error != "":
				f := failure
				f.ID = u.ID
				rs = append(rs, f)
			default:
				rs = append(rs, wire.UnitResult{ID: u.ID, OK: true, Digest: "src-" + string(u.Dest)})
			}
		}
		m.Done(rs)
	}
	return c, m
}

// TestSourceErrorsSkip: with Skip, a file that fails at the source is skipped and
// listed, its remaining chunks are not sent, the final check leaves it out, and the job
// ends PartiallyComplete — never Complete — with every other file verified.
func TestSourceErrorsSkip(t *testing.T) {
	c, m := runWithSourceFailure(t, contract.SourceErrorsSkip, wire.UnitResult{Error: "opening source d/a: no such file or directory", Source: true})
	r := c.Report()
	if r.FilesSkipped != 2 || r.FilesDone != 1 || r.FilesFailed != 0 {
		t.Fatalf("done %d, skipped %d, failed %d; want 1 done (d/b), 2 skipped, 0 failed", r.FilesDone, r.FilesSkipped, r.FilesFailed)
	}
	if len(r.SkippedFiles) != 2 || r.SkippedFiles[0].Path != "d/big" || !strings.Contains(r.SkippedFiles[0].Error, "changed while it was read") ||
		r.SkippedFiles[1].Path != "d/a" || !strings.Contains(r.SkippedFiles[1].Error, "no such file") {
		t.Fatalf("skipped files %+v", r.SkippedFiles)
	}
	if r.Error != "" {
		t.Errorf("a skipped file set the job's error: %q", r.Error)
	}
	for _, u := range c.units {
		if u.file.skipped {
			t.Errorf("unit %d of skipped %s is still to be sent", u.u.ID, u.u.Source)
		}
	}
	// The destination holds only d/b: the check passes without the skipped files.
	answerManifest(t, c, m, func(fs []wire.ManifestFile) []wire.ManifestFile {
		var kept []wire.ManifestFile
		for _, f := range fs {
			if f.Path == "out/d/b" {
				kept = append(kept, f)
			}
		}
		return kept
	})
	if got := c.Phase(); got != contract.PhasePartiallyComplete {
		t.Fatalf("phase %s, want PartiallyComplete", got)
	}
	if !c.Phase().Finished() {
		t.Fatal("PartiallyComplete does not count as finished")
	}
	if g, ok := c.request(m, 1); !ok || !g.Finished {
		t.Fatalf("a stripe asking for work after the end got %+v", g)
	}
}

// TestSourceErrorsSkipStillChecksTheRest: skipping is no excuse for the files that were
// sent — one missing at the destination fails the job.
func TestSourceErrorsSkipStillChecksTheRest(t *testing.T) {
	c, m := runWithSourceFailure(t, contract.SourceErrorsSkip, wire.UnitResult{})
	answerManifest(t, c, m, func(fs []wire.ManifestFile) []wire.ManifestFile {
		var kept []wire.ManifestFile
		for _, f := range fs {
			if f.Path == "out/d/b" { // d/a, sent and verified, is missing
				kept = append(kept, f)
			}
		}
		return kept
	})
	if got, r := c.Phase(), c.Report(); got != contract.PhaseFailed || !strings.Contains(r.Error, "out/d/a: no receiver holds it as final") {
		t.Fatalf("phase %s (%s), want Failed naming out/d/a", got, r.Error)
	}
}

// TestSourceErrorsFailOrDestinationErrors: a source failure fails the job under Fail
// (the default), and under Skip a failure at the destination still fails it.
func TestSourceErrorsFailOrDestinationErrors(t *testing.T) {
	cases := map[string]struct {
		sourceErrors string
		failure      wire.UnitResult
		wantSkipped  int64
		wantFailed   int64
		wantErr      string
	}{
		"Fail: a source error fails the job": {sourceErrors: "", failure: wire.UnitResult{Error: "opening source d/a: permission denied", Source: true},
			wantFailed: 2, wantErr: "changed while it was read: d/big (and 1 more errors)"},
		"Skip: a destination error fails the job": {sourceErrors: contract.SourceErrorsSkip,
			failure: wire.UnitResult{Error: "destination file exists: out/d/a (overwrite: Never)"}, wantSkipped: 1, wantFailed: 1, wantErr: "destination file exists: out/d/a"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, _ := runWithSourceFailure(t, tc.sourceErrors, tc.failure)
			r := c.Report()
			if r.Phase != contract.PhaseFailed {
				t.Fatalf("phase %s, want Failed", r.Phase)
			}
			if r.FilesSkipped != tc.wantSkipped || r.FilesFailed != tc.wantFailed || !strings.Contains(r.Error, tc.wantErr) {
				t.Fatalf("skipped %d (want %d), failed %d (want %d), error %q (want %q)", r.FilesSkipped, tc.wantSkipped, r.FilesFailed, tc.wantFailed, r.Error, tc.wantErr)
			}
		})
	}
}

func TestSourceErrorsOption(t *testing.T) {
	for in, want := range map[string]string{"": contract.SourceErrorsFail, "Fail": contract.SourceErrorsFail, "skip": contract.SourceErrorsSkip} {
		c := newCore(t, map[string]int{"d/a": 1})
		o := c.opts
		o.SourceErrors = in
		got, err := New(o, Params{})
		if err != nil || got.opts.SourceErrors != want {
			t.Errorf("--source-errors %q: %v, %q; want %q", in, err, got.opts.SourceErrors, want)
		}
	}
	o := newCore(t, map[string]int{"d/a": 1}).opts
	o.SourceErrors = "Ignore"
	if _, err := New(o, Params{}); err == nil || !strings.Contains(err.Error(), "--source-errors") {
		t.Errorf("--source-errors Ignore: %v, want refused", err)
	}
}

// TestPathsLongerThanAPathMayBe: a file whose destination path is longer than
// wire.MaxPath (the kernel's PATH_MAX; Linux holds deeper trees) cannot be named in a
// frame. It is refused at the listing, naming it, under Fail, and skipped and listed
// under Skip, the rest of the job going on; never a job that fails later by a frame's
// error, or a chunked file that arrives where a small one would not.
func TestPathsLongerThanAPathMayBe(t *testing.T) {
	root := tempRoot(t)
	root.MkdirAll("d", 0o755)
	root.WriteFile("d/short", []byte("short"), 0o644)
	deep, name := []string{"d"}, strings.Repeat("n", 250)
	for len(strings.Join(deep, "/")) <= wire.MaxPath-len("out/")-len("/leaf") { // one name more than fits
		deep = append(deep, name)
	}
	r := root
	for _, n := range deep {
		r.Mkdir(n, 0o755)
		next, err := r.OpenRoot(n)
		if err != nil {
			t.Fatal(err)
		}
		defer next.Close()
		r = next
	}
	if err := r.WriteFile("leaf", []byte("deep"), 0o644); err != nil {
		t.Fatal(err)
	}
	long := strings.Join(append(deep, "leaf"), "/")
	if n := len("out/" + long); n <= wire.MaxPath || n > wire.MaxPath+len(name)+1 {
		t.Fatalf("the tree's destination path is %d bytes, want just beyond %d", n, wire.MaxPath)
	}
	opts := func(sourceErrors string) Options { return listingOptions(root, sourceErrors) }
	why := fmt.Sprintf("its destination path is %d bytes long, and a path may be at most %d", len("out/"+long), wire.MaxPath)
	if _, err := New(opts(""), Params{Streams: 1}); err == nil || !strings.Contains(err.Error(), long) || !strings.Contains(err.Error(), why) {
		t.Fatalf("under Fail: %v; want a refusal naming the path and why", err)
	}
	c, err := New(opts(contract.SourceErrorsSkip), Params{Streams: 1})
	if err != nil {
		t.Fatalf("under Skip: %v", err)
	}
	rep := c.Report()
	// listed as far as the report's bound: the first MaxFailedPath bytes of it
	if rep.FilesTotal != 2 || rep.FilesSkipped != 1 || len(rep.SkippedFiles) != 1 || rep.SkippedFiles[0].Path != contract.Cut(long, contract.MaxFailedPath) || !strings.Contains(rep.SkippedFiles[0].Error, why) {
		t.Fatalf("under Skip: %d files, %d skipped %+v; want the deep one skipped and listed", rep.FilesTotal, rep.FilesSkipped, rep.SkippedFiles)
	}
	if len(c.files) != 1 || c.files[0].dest != "out/d/short" {
		t.Fatalf("files to send %v, want only out/d/short", c.files)
	}
}

// listingOptions are a job of root's directory d into out, named j.
func listingOptions(root *os.Root, sourceErrors string) Options {
	return Options{Root: root, Paths: []string{"d"}, DestPath: "out", Job: "j", Checksum: "SHA256", Verify: true,
		BlockSize: 100, ChunkSize: 300, SourceErrors: sourceErrors, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// TestSourceNamesThatAreTemporaryNames: a source file named as the temporary file that
// another file of the job is written under until verified (mover.TempName: the debris
// of an interrupted copy, copied on) would be written through the same destination
// file as that one, and each run would fail with one holding the other's bytes. It is
// refused at the listing under Fail, naming it, and skipped and listed under Skip; a
// name that only looks like a temporary name, and the same names in a job of another
// name, are moved as any file.
func TestSourceNamesThatAreTemporaryNames(t *testing.T) {
	root := tempRoot(t)
	root.MkdirAll("d/sub", 0o755)
	debris := "d/sub/" + path.Base(mover.TempName("out/d/sub/f1", "j"))
	lookalike := "d/sub/.f2.00000000000000000000000000000000.dtnpart"
	for _, p := range []string{"d/sub/f1", debris, "d/sub/f2", lookalike} {
		root.WriteFile(p, []byte(p), 0o644)
	}
	why := `its destination name is the temporary name that d/sub/f1 is written under in job "j"`
	if _, err := New(listingOptions(root, ""), Params{Streams: 1}); err == nil || !strings.Contains(err.Error(), "source "+debris+" refused: "+why) {
		t.Fatalf("under Fail: %v; want a refusal naming %s and why", err, debris)
	}
	c, err := New(listingOptions(root, contract.SourceErrorsSkip), Params{Streams: 1})
	if err != nil {
		t.Fatalf("under Skip: %v", err)
	}
	rep := c.Report()
	if rep.FilesTotal != 4 || rep.FilesSkipped != 1 || len(rep.SkippedFiles) != 1 || rep.SkippedFiles[0].Path != debris || !strings.Contains(rep.SkippedFiles[0].Error, why) {
		t.Fatalf("under Skip: %d files, %d skipped %+v; want %s skipped and listed", rep.FilesTotal, rep.FilesSkipped, rep.SkippedFiles, debris)
	}
	var dests []string
	for _, f := range c.files {
		dests = append(dests, f.dest)
	}
	if want := []string{"out/d/sub/" + path.Base(lookalike), "out/d/sub/f1", "out/d/sub/f2"}; !slices.Equal(dests, want) || c.byDest["out/"+debris] != nil {
		t.Fatalf("files to send %v, want %v", dests, want)
	}
	other := listingOptions(root, "")
	other.Job = "another job"
	if c, err := New(other, Params{Streams: 1}); err != nil || len(c.files) != 4 {
		t.Fatalf("in a job of another name: %v; want all four files to send", err)
	}
}

// tempRoot is an empty directory opened as a root, closed at the test's end.
func tempRoot(t *testing.T) *os.Root {
	t.Helper()
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root
}

// TestEntriesThatAreNotFilesAreReported: what the listing finds under the source paths
// and does not move — a symlinked directory, a symlink to nothing, a symlink loop, a
// FIFO — is counted and listed with why in the report (the job's status.notMoved), each
// once although two source paths reach it, and the list stops at MaxFailedFiles while
// the count goes on. None of it makes the job partial or refuses it, under Fail as
// under Skip: the regular files are the job.
func TestEntriesThatAreNotFilesAreReported(t *testing.T) {
	root := tempRoot(t)
	root.MkdirAll("d/sub/real", 0o755)
	root.WriteFile("d/sub/real/f", []byte("f"), 0o644)
	root.WriteFile("d/a", []byte("a"), 0o644)
	for _, l := range [][2]string{{"real", "d/sub/linked"}, {"nothing", "d/sub/dangling"}, {"loop", "d/sub/loop"}} {
		if err := root.Symlink(l[0], l[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mkfifo(path.Join(root.Name(), "d/fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := []contract.FailedFile{
		{Path: "d/fifo", Error: "not a regular file"},
		{Path: "d/sub/dangling", Error: "a symlink to nothing (its target does not exist)"},
		{Path: "d/sub/linked", Error: "symlinked directory not followed"},
		{Path: "d/sub/loop", Error: "a symlink loop"},
	}
	for _, sourceErrors := range []string{"", contract.SourceErrorsSkip} {
		opts := listingOptions(root, sourceErrors)
		opts.Paths = []string{"d", "d/sub"}
		c, err := New(opts, Params{Streams: 1})
		if err != nil {
			t.Fatalf("sourceErrors %q: %v", sourceErrors, err)
		}
		rep := c.Report()
		if rep.FilesTotal != 2 || rep.FilesSkipped != 0 || rep.EntriesNotMoved != int64(len(want)) || !slices.Equal(rep.NotMoved, want) {
			t.Fatalf("sourceErrors %q: %d files, %d skipped, %d not moved %+v; want 2 files and not moved %+v",
				sourceErrors, rep.FilesTotal, rep.FilesSkipped, rep.EntriesNotMoved, rep.NotMoved, want)
		}
	}

	many := tempRoot(t)
	many.MkdirAll("d", 0o755)
	many.WriteFile("d/file", []byte("file"), 0o644)
	n := contract.MaxFailedFiles + 7
	for i := range n {
		if err := many.Symlink("nothing", fmt.Sprintf("d/l%02d", i)); err != nil {
			t.Fatal(err)
		}
	}
	c, err := New(listingOptions(many, ""), Params{Streams: 1})
	if err != nil {
		t.Fatal(err)
	}
	rep := c.Report()
	if rep.EntriesNotMoved != int64(n) || len(rep.NotMoved) != contract.MaxFailedFiles || rep.NotMoved[0].Path != "d/l00" || rep.FilesTotal != 1 {
		t.Fatalf("%d not moved, %d listed (first %+v), %d files; want %d, %d listed from d/l00, 1 file",
			rep.EntriesNotMoved, len(rep.NotMoved), rep.NotMoved[:min(1, len(rep.NotMoved))], rep.FilesTotal, n, contract.MaxFailedFiles)
	}
}

// TestReportsOfHostileNamesFitAnAnnotation: a report travels in one annotation of the
// coordinator's pod, and a pod's annotations hold at most 256 KiB. A dataset deep in
// directories of long names that are not UTF-8 (shown with four bytes of escape for
// each), whose files all fail — some at the source (skipped), the rest at the
// destination with errors naming them — beside as many entries that are not files,
// still gives a report of at most 128 KiB, each listed path and error within the API's
// bounds, and an error message within MaxError.
func TestReportsOfHostileNamesFitAnAnnotation(t *testing.T) {
	root := tempRoot(t)
	name := strings.Repeat("\xfe\x80", 125)
	deep := "d"
	for len(deep)+len(name)+1 < wire.MaxPath-len("out/")-len("/f00") {
		deep += "/" + name
	}
	if err := root.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	n := contract.MaxFailedFiles + 5
	for i := range n {
		root.WriteFile(fmt.Sprintf("%s/f%02d", deep, i), []byte("x"), 0o644)
		if err := root.Symlink("nothing", fmt.Sprintf("%s/l%02d", deep, i)); err != nil {
			t.Fatal(err)
		}
	}
	c, err := New(listingOptions(root, contract.SourceErrorsSkip), Params{Streams: 1})
	if err != nil {
		t.Fatal(err)
	}
	c.SetPhase(contract.PhaseTransferring)
	m := c.Join(0)
	m.Summary(wire.Summary{Last: true})
	for i := 0; ; i++ {
		g, ok := c.request(m, 1)
		if !ok || g.Finished || g.Manifest || len(g.Units) == 0 {
			break
		}
		var rs []wire.UnitResult
		for _, u := range g.Units {
			shown := fmt.Sprintf("%q", string(u.Dest))
			r := wire.UnitResult{ID: u.ID, Error: "writing " + shown + ": no space left on device; " + shown}
			if i%2 == 0 {
				r = wire.UnitResult{ID: u.ID, Error: "source file changed while it was read: " + shown, Source: true}
			}
			rs = append(rs, r)
		}
		m.Done(rs)
	}
	rep := c.Report()
	if rep.Phase != contract.PhaseFailed || rep.FilesFailed == 0 || rep.FilesSkipped == 0 || rep.EntriesNotMoved != int64(n) {
		t.Fatalf("phase %s, %d failed, %d skipped, %d not moved; want Failed with files failed, skipped and %d not moved", rep.Phase, rep.FilesFailed, rep.FilesSkipped, rep.EntriesNotMoved, n)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 128<<10 {
		t.Errorf("the report is %d bytes, want at most %d", len(b), 128<<10)
	}
	for _, list := range [][]contract.FailedFile{rep.FailedFiles, rep.SkippedFiles, rep.NotMoved} {
		if len(list) == 0 {
			t.Fatal("a list is empty")
		}
		for _, f := range list {
			if len(f.Path) > contract.MaxFailedPath || len(f.Error) > contract.MaxFailedError || !utf8.ValidString(f.Path) || !utf8.ValidString(f.Error) {
				t.Fatalf("listed %d/%d bytes (valid UTF-8: %v), want at most %d/%d", len(f.Path), len(f.Error), utf8.ValidString(f.Path+f.Error), contract.MaxFailedPath, contract.MaxFailedError)
			}
		}
	}
	if len(rep.Error) > contract.MaxError || !strings.HasPrefix(rep.Error, "writing ") {
		t.Errorf("error of %d bytes starting %.40q, want at most %d starting with the first failure", len(rep.Error), rep.Error, contract.MaxError)
	}
}
