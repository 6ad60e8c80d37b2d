package wan

import (
	"bytes"
	"context"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dtnflow/dtnflow/test/topology"
	"github.com/dtnflow/dtnflow/test/wanem"
)

func TestDatasetSizes(t *testing.T) {
	for name, c := range map[string]struct {
		spec          DatasetSpec
		files         int
		total, lo, hi int64
	}{
		"large": {DefaultDataset(Large), 1, 4 << 30, 4 << 30, 4 << 30},
		"small": {DefaultDataset(Small), 20000, 20000 * 64 << 10, 64 << 10, 64 << 10},
		"mixed": {DefaultDataset(Mixed), -1, 4 << 30, 64 << 10, 1 << 30},
	} {
		sizes, err := c.spec.Sizes()
		if err != nil {
			t.Fatal(err)
		}
		var total, lo, hi int64 = 0, 1 << 62, 0
		for _, s := range sizes {
			total += s
			lo, hi = min(lo, s), max(hi, s)
		}
		if c.files >= 0 && len(sizes) != c.files {
			t.Errorf("%s: %d files, want %d", name, len(sizes), c.files)
		}
		// The last file of a mix is what is left, so it may be smaller than the floor.
		if name == "mixed" {
			lo = min(sizes[0], sizes[1])
		}
		if total != c.total || lo < c.lo || hi > c.hi {
			t.Errorf("%s: total %d in [%d, %d], want %d in [%d, %d]", name, total, lo, hi, c.total, c.lo, c.hi)
		}
		again, _ := c.spec.Sizes()
		if !reflect.DeepEqual(sizes, again) {
			t.Errorf("%s: sizes differ between calls", name)
		}
	}
	mixed, _ := DefaultDataset(Mixed).Sizes()
	var under1M, over100M int
	for _, s := range mixed {
		if s < 1<<20 {
			under1M++
		}
		if s > 100<<20 {
			over100M++
		}
	}
	if under1M == 0 || over100M == 0 {
		t.Errorf("mixed dataset lacks small (%d) or large (%d) files", under1M, over100M)
	}
}

func TestDatasetSample(t *testing.T) {
	if s := DefaultDataset(Large).Sample(1 << 30); s.LargeBytes != 1<<30 {
		t.Errorf("large sample: %+v", s)
	}
	if s := DefaultDataset(Small).Sample(10 << 20); s.SmallCount != 160 || s.SmallBytes != 64<<10 {
		t.Errorf("small sample: %+v", s)
	}
	if s := DefaultDataset(Mixed).Sample(1 << 30); s.MixedTotalBytes != 1<<30 || s.MixedMaxBytes != 1<<30 {
		t.Errorf("mixed sample: %+v", s)
	}
	if s := DefaultDataset(Large).Sample(8 << 30); s.LargeBytes != 4<<30 {
		t.Errorf("a sample larger than the dataset: %+v", s)
	}
}

func TestGenerateWritesReadableDeterministicFiles(t *testing.T) {
	spec := DatasetSpec{Kind: Mixed, MixedTotalBytes: 3 << 20, MixedMinBytes: 4 << 10, MixedMaxBytes: 1 << 20, Seed: 3}
	a, err := Generate(spec, filepath.Join(t.TempDir(), "a"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Generate(spec, filepath.Join(t.TempDir(), "b"))
	if err != nil {
		t.Fatal(err)
	}
	if a.Total != 3<<20 || !reflect.DeepEqual(a.Files, b.Files) || !reflect.DeepEqual(a.Sizes, b.Sizes) {
		t.Fatalf("datasets differ or are the wrong size: %d %v", a.Total, a.Sizes)
	}
	got, err := treeBytes(a.Root)
	if err != nil || got != a.Total {
		t.Fatalf("on disk %d, want %d (%v)", got, a.Total, err)
	}
	for i, f := range a.Files {
		fi, err := os.Stat(filepath.Join(a.Root, f))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() != a.Sizes[i] || fi.Mode().Perm()&0o004 == 0 {
			t.Errorf("%s: size %d mode %v", f, fi.Size(), fi.Mode())
		}
		x, _ := os.ReadFile(filepath.Join(a.Root, f))
		y, _ := os.ReadFile(filepath.Join(b.Root, f))
		if !bytes.Equal(x, y) {
			t.Errorf("%s: content differs between two generations", f)
		}
	}
	// Random content: a 64 KiB block of zeros would compress, and would not test much.
	x, _ := os.ReadFile(filepath.Join(a.Root, a.Files[0]))
	if bytes.Count(x, []byte{0}) > len(x)/100 {
		t.Errorf("content is not random")
	}
}

func TestGlobusPresetBySize(t *testing.T) {
	for avg, want := range map[int64]string{
		64 << 10: "-p 2 -cc 2 -pp -fast", 49e6: "-p 2 -cc 2 -pp -fast",
		50e6: "-p 4 -cc 2 -pp -fast", 250e6: "-p 4 -cc 2 -pp -fast",
		250e6 + 1: "-p 8 -cc 2 -fast", 4 << 30: "-p 8 -cc 2 -fast",
	} {
		if _, cfg := GlobusPreset(avg); cfg.String() != want {
			t.Errorf("average %d: %s, want %s", avg, cfg, want)
		}
	}
}

func TestGridFTPGrid(t *testing.T) {
	one := DefaultGridFTPGrid(1, []int{1, 8}, []int{1, 4}, []int64{0, 4 << 20})
	if len(one) != 4 || one[0].Concurrency != 0 || one[0].Pipelining {
		t.Errorf("single file grid: %v", one)
	}
	many := DefaultGridFTPGrid(100, []int{1, 8}, []int{1, 4}, []int64{0})
	if len(many) != 4 || !many[3].Pipelining || many[3].String() != "-p 8 -cc 4 -pp -fast" || many[3].streams(100) != 32 {
		t.Errorf("many files grid: %v", many)
	}
	if (GridFTPConfig{}).String() != "(defaults)" || len((GridFTPConfig{}).Args()) != 0 {
		t.Error("defaults must pass no flag")
	}
	if got := (GridFTPConfig{Parallelism: 4, Concurrency: 8}).streams(3); got != 12 {
		t.Errorf("streams with fewer files than -cc: %d", got)
	}
}

func TestMatrixAndNames(t *testing.T) {
	m := Matrix([]int64{1e9}, []time.Duration{50 * time.Millisecond}, []float64{0, 1e-4, 1e-3}, []int64{0},
		[]DatasetSpec{DefaultDataset(Large), DefaultDataset(Small)}, []bool{false, true})
	if len(m) != 12 {
		t.Fatalf("%d scenarios, want 12", len(m))
	}
	names := map[string]bool{}
	for _, s := range m {
		names[s.Name()] = true
	}
	if len(names) != 12 || !names["1Gbit-50ms-loss0.001-small-cross"] {
		t.Errorf("names: %v", names)
	}
	link := m[1].Link(7)
	if link.AtoB.Delay != 25*time.Millisecond || link.BtoA.Loss != 1e-4 || link.Seed != 7 {
		t.Errorf("link: %+v", link)
	}
}

func sampleResults() []Result {
	env := &Env{Scenario: Scenario{RateBitsPerSecond: 1e9, RTT: 50 * time.Millisecond, Dataset: DefaultDataset(Large)}}
	var rs []Result
	for _, p := range []int{1, 2, 4, 8, 16, 32} {
		// A path where streams help up to about 8 and then hurt.
		bps := 1e9 * float64(p) / (float64(p) + 1.5) * (1 - 0.004*float64(p))
		r := Result{Tool: string(GridFTPGrid), Config: "-p x", Streams: p, Sample: true, Bytes: int64(bps / 8), Seconds: 1}
		r.finish(env, 0.5)
		rs = append(rs, r)
	}
	best := Result{Tool: string(GridFTPGrid), Config: "-p 8 -fast", Streams: 8, Chosen: true, Bytes: 4 << 30, Seconds: 40, ProbeSeconds: 6, Note: "best"}
	best.finish(env, 9)
	def := Result{Tool: string(GridFTPDefault), Config: "(defaults)", Streams: 1, Chosen: true, Bytes: 4 << 30, Seconds: 90}
	def.finish(env, 8)
	return append(rs, best, def)
}

func TestFinishAndMarkdown(t *testing.T) {
	rs := sampleResults()
	def := rs[len(rs)-1]
	if def.Scenario != "1Gbit-50ms-loss0-large" || def.BitsPerSecond != float64(4<<30)*8/90 ||
		def.PercentOfLink != 100*def.BitsPerSecond/1e9 || def.CPUSecondsPerGB != 8/(float64(4<<30)/1e9) || def.TotalSeconds != 90 {
		t.Errorf("derived figures: %+v", def)
	}
	var b strings.Builder
	if err := WriteMarkdown(&b, rs); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 { // header, rule, two chosen rows; samples are not rows
		t.Fatalf("table:\n%s", b.String())
	}
	if !strings.Contains(lines[2], "`-p 8 -fast`") || !strings.Contains(lines[2], "40.0 (+6 grid)") || !strings.Contains(lines[3], "(defaults)") {
		t.Errorf("rows:\n%s", b.String())
	}
	var j bytes.Buffer
	if err := WriteJSONLines(&j, rs); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(j.String(), "\n"); n != len(rs) {
		t.Errorf("%d JSON lines, want %d", n, len(rs))
	}
}

func TestPlotDrawsAPNGWithAFit(t *testing.T) {
	rs := sampleResults()
	fit, err := FitStreams(rs[:6])
	if err != nil {
		t.Fatal(err)
	}
	if fit.OptimalStreams < 4 || fit.OptimalStreams > 32 {
		t.Errorf("fit optimum %d streams for a curve that peaks near 8-16", fit.OptimalStreams)
	}
	path := filepath.Join(t.TempDir(), "p.png")
	if err := Plot(rs[0].Scenario, 1e9, rs, path); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() < 600 || b.Dy() < 400 {
		t.Errorf("image %v", b)
	}
}

// TestRunnersOnATinyPath runs iperf3 and the three GridFTP rows on a real emulated
// path with a tiny dataset (root, the tools, a few seconds).
func TestRunnersOnATinyPath(t *testing.T) {
	if err := wanem.CanEmulate(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	for _, b := range []string{"iperf3", "globus-gridftp-server", "globus-url-copy"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Skipf("%s not installed (make bench-wan installs it)", b)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, stateDir := t.TempDir(), t.TempDir()
	rs, err := Run(ctx, Options{
		Scenarios: []Scenario{{RateBitsPerSecond: 200e6, RTT: 4 * time.Millisecond,
			Dataset: DatasetSpec{Kind: Small, SmallCount: 40, SmallBytes: 64 << 10, Seed: 1}, CrossTraffic: true}},
		Runners: []Runner{
			Iperf3{Streams: []int{2}, Seconds: 1},
			GridFTP{Mode: GridFTPDefault}, GridFTP{Mode: GridFTPPreset},
			GridFTP{Mode: GridFTPGrid, Grid: DefaultGridFTPGrid(40, []int{1, 2}, []int{1, 4}, []int64{0})},
		},
		WorkDir: filepath.Join(t.TempDir(), "work"), OutDir: out, SampleSeconds: 0.05, StateDir: stateDir,
	})
	if err != nil {
		t.Fatal(err)
	}
	chosen := map[string]Result{}
	for _, r := range rs {
		if r.Chosen {
			chosen[r.Tool] = r
		}
	}
	for _, tool := range []string{"iperf3", "gridftp-default", "gridftp-preset", "gridftp-grid"} {
		r, ok := chosen[tool]
		if !ok {
			t.Errorf("no %s row", tool)
			continue
		}
		// Never above the bottleneck (shared with cross traffic), never nothing.
		if r.BitsPerSecond <= 0 || r.BitsPerSecond > 200e6*1.02 || r.CPUSecondsPerGB <= 0 {
			t.Errorf("%s: %+v", tool, r)
		}
	}
	if r := chosen["gridftp-preset"]; r.Config != "-p 2 -cc 2 -pp -fast" {
		t.Errorf("preset for 64 KiB files: %s", r.Config)
	}
	if r := chosen["gridftp-grid"]; r.ProbeSeconds <= 0 || r.Files != 40 {
		t.Errorf("grid row: %+v", r)
	}
	for _, f := range []string{"results.md", "results.jsonl", "200Mbit-4ms-loss0-small-cross.png"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	// The topology is gone: its state file (removed last, after the namespaces) too.
	if left, err := topology.List(stateDir); err != nil || len(left) != 0 {
		t.Errorf("topology left behind: %v %v", left, err)
	}
}

func TestParseAutoLog(t *testing.T) {
	out := `time=2026-11-23T03:10:01.000Z level=INFO msg="Probe sample" phase=Buffer stripes=1 streams=1 bufferBytes=0 rate="432.1 Mbit/s" seconds=1.83 ended=Precise halfWidth=0.039 sourceMillicores=310 destinationMillicores=280
time=2026-11-23T03:10:03.000Z level=INFO msg="Probe sample" phase=Streams stripes=1 streams=4 bufferBytes=4194304 rate="1.02 Gbit/s" seconds=2.03 ended=Ceiling halfWidth=0.282 sourceMillicores=500 destinationMillicores=420
time=2026-11-23T03:10:03.500Z level=INFO msg="Probe sample" phase=Stripes stripes=2 streams=4 bufferBytes=4194304 rate="990.0 Mbit/s" seconds=1.42 ended=Decided halfWidth=0.107 sourceMillicores=86 destinationMillicores=207
time=2026-11-23T03:10:04.000Z level=INFO msg=Planned stripes=2 streams=4 bufferBytes=4194304 predicted="950.0 Mbit/s" binding=path classes=1 reason="a \"quoted\" reason"
Complete: 1 files, 4294967296 bytes in 40.1s (857.0 Mbit/s); this run sent 4294967296 bytes`
	probes, plan := parseAutoLog(out)
	if len(probes) != 3 || probes[0].Streams != 1 || probes[0].BitsPerSecond != 432.1e6 || probes[0].Seconds != 1.83 ||
		probes[1].BitsPerSecond != 1.02e9 || probes[1].BufferBytes != 4<<20 || !probes[1].Sample ||
		probes[2].Stripes != 2 || probes[2].Streams != 8 || !strings.Contains(probes[2].Note, "Decided") {
		t.Errorf("probes: %+v", probes)
	}
	if plan != (DtnflowConfig{Stripes: 2, Streams: 4, Buffer: 4 << 20}) {
		t.Errorf("plan: %+v", plan)
	}
	if kv := slogFields(`msg=Planned reason="a \"quoted\" reason" x=1`); kv["reason"] != `a "quoted" reason` || kv["x"] != "1" {
		t.Errorf("fields: %v", kv)
	}
}

func TestParseClassLog(t *testing.T) {
	out := `time=2026-11-23T03:10:00.500Z level=INFO msg="Small files: size classes from the first sample" scheduler=ProMC classes="Small 6, Large 2"
time=2026-11-23T03:10:04.000Z level=INFO msg=Planned stripes=2 streams=4 bufferBytes=4194304 classes=2 scheduler=ProMC schedulerReason="small files"
time=2026-11-23T03:10:14.000Z level=INFO msg="Moved channels between size classes" scheduler=ProMC from=Large to=Small channels=1 fromChannels=1 toChannels=7 reason="x"
time=2026-11-23T03:10:29.000Z level=INFO msg="Moved channels between size classes" scheduler=ProMC from=Small to=Large channels=6 fromChannels=0 toChannels=7 reason="y"`
	if got, want := parseClassLog(out), (classLog{scheduler: "ProMC", moves: 2, channelsMoved: 7}); got != want {
		t.Errorf("parseClassLog: %+v, want %+v", got, want)
	}
	if got := parseClassLog("msg=Planned stripes=1 streams=1"); got != (classLog{}) {
		t.Errorf("no classes: %+v", got)
	}
}

func TestScenarioRatios(t *testing.T) {
	row := func(sc, tool string, seconds, total float64) Result {
		return Result{Scenario: sc, Tool: tool, Chosen: true, Seconds: seconds, TotalSeconds: total, Config: tool}
	}
	rs := []Result{
		row("a", "gridftp-default", 80, 80), row("a", "gridftp-preset", 40, 40), row("a", "gridftp-grid", 36, 36),
		row("a", "dtnflow-grid", 37, 37), row("a", "dtnflow-auto", 38, 38),
		{Scenario: "a", Tool: "dtnflow-auto", Sample: true, Seconds: 2},         // a probe sample is not a row
		row("b", "gridftp-default", 100, 100), row("b", "dtnflow-auto", 50, 50), // no grid: no best fixed
		row("c", "gridftp-grid", 30, 30), // no auto: no ratios
	}
	got := ScenarioRatios(rs)
	if len(got) != 2 || got[0].Best.Tool != "gridftp-grid" || math.Abs(got[0].AutoOverBest-36.0/38) > 1e-12 ||
		got[0].AutoOverDefault != 80.0/38 || got[0].AutoOverPreset != 40.0/38 || got[0].AutoOverGridFTPBest != 36.0/38 ||
		got[1].AutoOverBest != 0 || got[1].AutoOverDefault != 2 {
		t.Fatalf("ratios %+v", got)
	}
	var b strings.Builder
	if err := WriteRatios(&b, rs); err != nil || !strings.Contains(b.String(), "| a | gridftp-grid `gridftp-grid` (36.0 s) | 0.95× | 0.95× | 2.11× | 1.05× |") ||
		!strings.Contains(b.String(), "| b | – | – | – | 2.00× | – |") || strings.Contains(b.String(), "| c |") {
		t.Errorf("table:\n%s", b.String())
	}
}

func TestPartialRun(t *testing.T) {
	ds := &Dataset{Files: []string{"d000/f000000.bin", "d000/f000001.bin", "d000/f000002.bin", "d000/f000003.bin"}, Sizes: []int64{100, 100, 100, 100}, Total: 400}
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "x", "d000"), 0o755)
	os.WriteFile(filepath.Join(dir, "x", "d000", "f000000.bin"), make([]byte, 100), 0o644)
	os.WriteFile(filepath.Join(dir, "x", "d000", ".f000001.bin.job.dtnpart"), make([]byte, 60), 0o644) // half way, not complete
	n, files, err := moved(dir, ds)
	if err != nil || n != 160 || files != 1 {
		t.Fatalf("moved = %d, %d, %v; want 160 bytes, 1 file", n, files, err)
	}
	var r Result
	scale := r.partial(ds, n, files, 20)
	if !r.Partial || r.Seconds != 50 || r.Bytes != 400 || r.MovedBytes != 160 || r.MovedFiles != 1 || scale != 2.5 || !strings.Contains(r.Note, "extrapolated") {
		t.Fatalf("partial: %+v, scale %g", r, scale)
	}
	// What the caller says of the run afterwards (the preset's class, a grid's size)
	// keeps the remark that it was stopped and extrapolated.
	r.addNote("Globus-like preset for small (<50 MB) average file size")
	if !strings.HasPrefix(r.Note, "stopped after 20 s") || !strings.HasSuffix(r.Note, "; Globus-like preset for small (<50 MB) average file size") {
		t.Fatalf("note after addNote: %q", r.Note)
	}
}

func TestPlotOfOneStreamOnly(t *testing.T) {
	// a grid of one setting at one stream (bench-wan -dtnflow-streams 1
	// -dtnflow-stripes 1): every point at x = 1, which a log axis cannot span alone
	env := &Env{Scenario: Scenario{RateBitsPerSecond: 1e9, RTT: 50 * time.Millisecond, Dataset: DefaultDataset(Small)}}
	sample := Result{Tool: string(DtnflowGrid), Config: "--streams 1 --stripes 1", Streams: 1, Sample: true, Bytes: 60 << 20, Seconds: 1}
	sample.finish(env, 0)
	chosen := Result{Tool: string(DtnflowGrid), Config: "--streams 1 --stripes 1", Streams: 1, Chosen: true, Bytes: 1 << 30, Seconds: 13}
	chosen.finish(env, 1)
	path := filepath.Join(t.TempDir(), "one.png")
	if err := Plot(sample.Scenario, 1e9, []Result{sample, chosen}, path); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		t.Fatalf("no plot: %v", err)
	}
}
