package wan

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// GridFTPConfig is one setting of globus-url-copy.
type GridFTPConfig struct {
	Parallelism int // -p (0: not given)
	Concurrency int // -cc (0: not given)
	Pipelining  bool
	Fast        bool
	TCPBuffer   int64 // -tcp-bs (0: not given, the kernel autotunes)
}

// Args are globus-url-copy's flags for the setting.
func (c GridFTPConfig) Args() []string {
	var a []string
	if c.Parallelism > 0 {
		a = append(a, "-p", strconv.Itoa(c.Parallelism))
	}
	if c.Concurrency > 0 {
		a = append(a, "-cc", strconv.Itoa(c.Concurrency))
	}
	if c.Pipelining {
		a = append(a, "-pp")
	}
	if c.Fast {
		a = append(a, "-fast")
	}
	if c.TCPBuffer > 0 {
		a = append(a, "-tcp-bs", strconv.FormatInt(c.TCPBuffer, 10))
	}
	return a
}

func (c GridFTPConfig) String() string {
	if s := strings.Join(c.Args(), " "); s != "" {
		return s
	}
	return "(defaults)"
}

// streams is the number of TCP data connections the setting opens at once.
func (c GridFTPConfig) streams(files int) int {
	return max(1, c.Parallelism) * max(1, min(c.Concurrency, files))
}

// GlobusPreset is the setting a Globus-Transfer-like service picks from the average
// file size. Globus publishes three size classes (below 50 MB, 50–250 MB, above
// 250 MB; see ../shared/notes/landscape.md) but not the values it uses today; these
// are ours, in the spirit of its published defaults (small files: pipelining and a
// little concurrency; large files: parallel streams), and they are the row's label so
// that nobody mistakes them for Globus's own.
func GlobusPreset(avgBytes int64) (string, GridFTPConfig) {
	switch {
	case avgBytes < 50e6:
		return "small (<50 MB)", GridFTPConfig{Concurrency: 2, Parallelism: 2, Pipelining: true, Fast: true}
	case avgBytes <= 250e6:
		return "medium (50–250 MB)", GridFTPConfig{Concurrency: 2, Parallelism: 4, Pipelining: true, Fast: true}
	}
	return "large (>250 MB)", GridFTPConfig{Concurrency: 2, Parallelism: 8, Fast: true}
}

// GridFTPMode says which GridFTP row a runner makes.
type GridFTPMode string

const (
	GridFTPDefault GridFTPMode = "gridftp-default"
	GridFTPPreset  GridFTPMode = "gridftp-preset"
	GridFTPGrid    GridFTPMode = "gridftp-grid"
)

// GridFTP runs globus-gridftp-server (anonymous, in src) and globus-url-copy (in dst,
// pulling) in one of three modes.
type GridFTP struct {
	Mode GridFTPMode
	// Grid lists the settings tried in GridFTPGrid mode (on the sample dataset).
	Grid []GridFTPConfig
}

// Name is the row label.
func (g GridFTP) Name() string { return string(g.Mode) }

const gridftpPort = 2811

// DefaultGridFTPGrid is the grid for a dataset: for one file only parallelism and
// the TCP buffer matter; for many files concurrency and pipelining too.
func DefaultGridFTPGrid(files int, ps, ccs []int, bufs []int64) []GridFTPConfig {
	var grid []GridFTPConfig
	if files <= 1 {
		ccs = []int{0}
	}
	for _, cc := range ccs {
		for _, p := range ps {
			for _, bs := range bufs {
				grid = append(grid, GridFTPConfig{Parallelism: p, Concurrency: cc, Pipelining: files > 1, Fast: true, TCPBuffer: bs})
			}
		}
	}
	return grid
}

// Run transfers the dataset as the mode says.
func (g GridFTP) Run(ctx context.Context, env *Env) ([]Result, error) {
	srv, err := start(ctx, env.Src, "globus-gridftp-server", "-aa", "-anonymous-user", "nobody",
		"-p", strconv.Itoa(gridftpPort), "-d", "error",
		"-control-interface", env.Src.Addr.String(), "-data-interface", env.Src.Addr.String())
	if err != nil {
		return nil, err
	}
	defer srv.stop(3 * time.Second)
	if err := WaitListening(ctx, env.Src, gridftpPort); err != nil {
		return nil, fmt.Errorf("%w: %s", err, tail(srv.out.String(), 500))
	}
	switch g.Mode {
	case GridFTPDefault:
		r, err := g.transfer(ctx, env, srv, env.Dataset, GridFTPConfig{})
		r.Chosen = true
		return []Result{r}, err
	case GridFTPPreset:
		class, cfg := GlobusPreset(env.Dataset.AverageBytes())
		r, err := g.transfer(ctx, env, srv, env.Dataset, cfg)
		r.Chosen = true
		r.addNote("Globus-like preset for " + class + " average file size")
		return []Result{r}, err
	}
	grid := g.Grid
	if len(grid) == 0 {
		return nil, fmt.Errorf("gridftp-grid: empty grid")
	}
	var out []Result
	var probe float64
	for _, cfg := range grid {
		r, err := g.transfer(ctx, env, srv, env.SampleDataset, cfg)
		if err != nil {
			return out, err
		}
		r.Sample = true
		probe += r.Seconds
		out = append(out, r)
		fmt.Fprintf(env.Log, "    sample %-32s %8.1f Mbit/s\n", cfg, r.BitsPerSecond/1e6)
	}
	best := out[0]
	for _, r := range out {
		if r.BitsPerSecond > best.BitsPerSecond {
			best = r
		}
	}
	cfg := configOf(best, grid)
	r, err := g.transfer(ctx, env, srv, env.Dataset, cfg)
	r.Chosen, r.ProbeSeconds = true, probe
	r.addNote(fmt.Sprintf("best of %d settings probed on %s (%.0f s of probing)", len(grid), humanBytes(env.SampleDataset.Total), probe))
	return append(out, r), err
}

// configOf finds the setting a result was made with.
func configOf(r Result, grid []GridFTPConfig) GridFTPConfig {
	for _, c := range grid {
		if c.String() == r.Config {
			return c
		}
	}
	return grid[0]
}

// transfer pulls ds from the server into a fresh directory and measures it.
func (g GridFTP) transfer(ctx context.Context, env *Env, srv *process, ds *Dataset, cfg GridFTPConfig) (Result, error) {
	res := Result{Tool: g.Name(), Config: cfg.String(), Streams: cfg.streams(ds.Count()), Parallelism: max(1, cfg.Parallelism),
		Concurrency: max(1, cfg.Concurrency), Pipelining: cfg.Pipelining, BufferBytes: cfg.TCPBuffer,
		Bytes: ds.Total, Files: ds.Count(), Started: time.Now()}
	dst, err := os.MkdirTemp(env.WorkDir, "gridftp-dst-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dst)
	base := fmt.Sprintf("ftp://%s:%d", env.Src.Addr, gridftpPort)
	args := cfg.Args()
	if ds.Spec.Kind == Large {
		args = append(args, base+filepath.Join(ds.Root, ds.Files[0]), "file://"+filepath.Join(dst, ds.Files[0]))
	} else {
		args = append(args, "-r", "-cd", base+ds.Root+"/", "file://"+dst+"/")
	}
	before := env.linkStats()
	s0 := srv.cpu()
	wall, ccpu, out, err := runTimed(ctx, env.Dst, "globus-url-copy", env.RunLimit, args...)
	env.saveLog(fmt.Sprintf("%s-%s-%d", g.Name(), strings.ReplaceAll(cfg.String(), " ", ""), time.Now().UnixNano()), out)
	if err != nil && !errors.Is(err, errRunLimit) {
		return res, err
	}
	scpu := srv.cpu() - s0
	after := env.linkStats()
	res.Seconds = wall
	cpuScale := 1.0
	if errors.Is(err, errRunLimit) {
		moved, files, _ := moved(dst, ds)
		cpuScale = res.partial(ds, moved, files, wall)
	} else if got, err := treeBytes(dst); err != nil || got != ds.Total {
		return res, fmt.Errorf("globus-url-copy %s wrote %d bytes of %d (%v)", cfg, got, ds.Total, err)
	}
	res.LinkLost = after.LostSegments - before.LostSegments
	res.LinkDropped = after.QueueDroppedSegments - before.QueueDroppedSegments
	res.finish(env, (ccpu+scpu)*cpuScale)
	return res, nil
}

// moved is what a run stopped early had written under dir: the bytes of every regular
// file, and how many files are complete (a dataset file name at its full size;
// dtnflow's temporary names do not count).
func moved(dir string, ds *Dataset) (int64, int, error) {
	want := map[string]int64{}
	for i, f := range ds.Files {
		want[filepath.Base(f)] = ds.Sizes[i]
	}
	var n int64
	complete := 0
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		n += fi.Size()
		if size, ok := want[d.Name()]; ok && size == fi.Size() {
			complete++
		}
		return nil
	})
	return n, complete, err
}

// treeBytes is the total size of the regular files under dir.
func treeBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	return n, err
}

// sortResults orders results for the table: scenario, then the tools in the order
// they ran.
func sortResults(rs []Result) {
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].Scenario < rs[j].Scenario })
}
