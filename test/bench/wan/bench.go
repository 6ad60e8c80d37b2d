package wan

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/dtnflow/dtnflow/test/topology"
	"github.com/dtnflow/dtnflow/test/wanem"
)

// Options configure a benchmark run.
type Options struct {
	Scenarios []Scenario
	Runners   []Runner
	// WorkDir holds datasets and destinations (tmpfs, so that disks are not what is
	// measured); it is removed at the end.
	WorkDir string
	// OutDir receives results.md, results.jsonl and one PNG per scenario.
	OutDir string
	// SampleSeconds sizes the sample dataset grid points are probed on: this many
	// seconds at the link rate.
	SampleSeconds float64
	// MTU, Realtime and HostSysctls shape the topology.
	MTU         int
	Realtime    bool
	HostSysctls map[string]string
	// StateDir for the topology's state file (see package topology).
	StateDir string
	Log      io.Writer
	// RunLimit stops any one transfer that runs longer (0: none); see Env.RunLimit.
	RunLimit time.Duration
}

// Run builds one topology (two sources, two destinations, one bottleneck), then for
// each scenario sets the bottleneck, writes the dataset, and runs every runner on it.
// Results are appended to OutDir/results.jsonl as they come, so that an interrupted
// run keeps what it measured; the table and the plots are rewritten after each
// scenario. The topology is removed when Run returns, however it returns.
func Run(ctx context.Context, opts Options) ([]Result, error) {
	if len(opts.Scenarios) == 0 || len(opts.Runners) == 0 {
		return nil, errors.New("nothing to run: no scenario or no tool")
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.WorkDir, 0o755); err != nil {
		return nil, err
	}
	defer os.RemoveAll(opts.WorkDir)
	// The anonymous GridFTP server reads as nobody: every directory on the way must
	// be searchable.
	for d := opts.WorkDir; d != "/" && d != "."; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o005 != 0o005 {
			_ = os.Chmod(d, fi.Mode().Perm()|0o005)
		}
	}
	jsonl, err := os.OpenFile(filepath.Join(opts.OutDir, "results.jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	defer jsonl.Close()

	deadline, ok := ctx.Deadline()
	lifetime := 6 * time.Hour
	if ok {
		lifetime = time.Until(deadline) + 5*time.Minute
	}
	topo, err := topology.Up(ctx, topology.Spec{
		Sources: 2, Destinations: 2, Link: opts.Scenarios[0].Link(1), MTU: opts.MTU,
		LinkOptions: wanem.Options{Realtime: opts.Realtime}, HostSysctls: opts.HostSysctls,
		StateDir: opts.StateDir, Lifetime: lifetime,
	})
	if err != nil {
		return nil, fmt.Errorf("topology: %w", err)
	}
	defer topo.Down()
	fmt.Fprintf(opts.Log, "Topology %s: sources %s, %s; destinations %s, %s\n", topo.ID,
		topo.Sources[0].Addr, topo.Sources[1].Addr, topo.Destinations[0].Addr, topo.Destinations[1].Addr)

	var all []Result
	var ds, sample *Dataset
	for i, sc := range opts.Scenarios {
		fmt.Fprintf(opts.Log, "Scenario %d/%d: %s\n", i+1, len(opts.Scenarios), sc.Name())
		if err := topo.Link.SetConfig(sc.Link(uint64(i + 1))); err != nil {
			return all, err
		}
		if ds == nil || !reflect.DeepEqual(ds.Spec, sc.Dataset) {
			if ds != nil {
				_ = os.RemoveAll(ds.Root)
				_ = os.RemoveAll(sample.Root)
			}
			fmt.Fprintf(opts.Log, "  writing the %s dataset\n", sc.Dataset.Kind)
			if ds, err = Generate(sc.Dataset, filepath.Join(opts.WorkDir, "data", "full")); err != nil {
				return all, err
			}
			sampleBytes := int64(float64(sc.RateBitsPerSecond) / 8 * opts.SampleSeconds)
			if sample, err = Generate(sc.Dataset.Sample(sampleBytes), filepath.Join(opts.WorkDir, "data", "sample")); err != nil {
				return all, err
			}
			fmt.Fprintf(opts.Log, "  %d files, %s (sample: %d files, %s); %s\n", ds.Count(), humanBytes(ds.Total),
				sample.Count(), humanBytes(sample.Total), ds.SizeHistogram())
		}
		before := topo.Link.Stats().AtoB
		env := &Env{Scenario: sc, Topo: topo, Src: topo.Sources[0], Dst: topo.Destinations[0],
			Dataset: ds, SampleDataset: sample, WorkDir: opts.WorkDir, Log: opts.Log,
			LogDir: filepath.Join(opts.OutDir, "logs"), RunLimit: opts.RunLimit}
		for _, r := range opts.Runners {
			fmt.Fprintf(opts.Log, "  %s\n", r.Name())
			rs, err := runWithCrossTraffic(ctx, env, topo, r)
			for _, res := range rs {
				if res.Chosen {
					fmt.Fprintf(opts.Log, "    %-16s %-40s %10s %5.1f%% %7.1fs CPU %.2f s/GB %s\n", res.Tool, res.Config,
						formatBPS(res.BitsPerSecond), res.PercentOfLink, res.Seconds, res.CPUSecondsPerGB, res.Note)
				}
			}
			if werr := WriteJSONLines(jsonl, rs); werr != nil {
				return all, werr
			}
			all = append(all, rs...)
			if err != nil {
				return all, fmt.Errorf("%s on %s: %w", r.Name(), sc.Name(), err)
			}
		}
		if err := writeOutputs(opts.OutDir, opts.Scenarios, all); err != nil {
			return all, err
		}
		st := topo.Link.Stats().AtoB
		fmt.Fprintf(opts.Log, "  emulator, this scenario: a→b lost %d, queue-dropped %d, not read in time %d; write lateness mean since start %v\n",
			st.LostSegments-before.LostSegments, st.QueueDroppedSegments-before.QueueDroppedSegments,
			st.KernelDropped-before.KernelDropped, st.LatenessMean)
	}
	return all, nil
}

// runWithCrossTraffic runs r with, if the scenario asks, a competing TCP flow from
// src1 to dst1 through the same bottleneck for the whole run.
func runWithCrossTraffic(ctx context.Context, env *Env, topo *topology.Topology, r Runner) ([]Result, error) {
	drops0 := topo.Link.Stats().AtoB.KernelDropped
	defer func() {
		if d := topo.Link.Stats().AtoB.KernelDropped - drops0; d > 0 {
			fmt.Fprintf(env.Log, "    WARNING: the emulator did not read %d packets in time (machine too busy); results are pessimistic\n", d)
		}
	}()
	if !env.Scenario.CrossTraffic {
		return r.Run(ctx, env)
	}
	const port = 5302
	src, dst := topo.Sources[1], topo.Destinations[1]
	srv, err := start(ctx, dst, "iperf3", "-s", "-B", dst.Addr.String(), "-p", strconv.Itoa(port))
	if err != nil {
		return nil, err
	}
	defer srv.stop(2 * time.Second)
	if err := WaitListening(ctx, dst, port); err != nil {
		return nil, err
	}
	cli, err := start(ctx, src, "iperf3", "-c", dst.Addr.String(), "-p", strconv.Itoa(port), "-t", "86400", "-P", "1")
	if err != nil {
		return nil, err
	}
	defer cli.stop(2 * time.Second)
	rs, err := r.Run(ctx, env)
	for i := range rs {
		rs[i].addNote("with 1 competing iperf3 TCP flow")
	}
	return rs, err
}

func writeOutputs(dir string, scenarios []Scenario, all []Result) error {
	f, err := os.Create(filepath.Join(dir, "results.md"))
	if err != nil {
		return err
	}
	if err := WriteMarkdown(f, all); err != nil {
		f.Close()
		return err
	}
	if len(ScenarioRatios(all)) > 0 {
		io.WriteString(f, "\n")
		if err := WriteRatios(f, all); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	for _, sc := range scenarios {
		name := sc.Name()
		has := false
		for _, r := range all {
			has = has || r.Scenario == name
		}
		if !has {
			continue
		}
		if err := Plot(name, float64(sc.RateBitsPerSecond), all, filepath.Join(dir, sanitize(name)+".png")); err != nil {
			return fmt.Errorf("plot %s: %w", name, err)
		}
	}
	return nil
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' {
			return r
		}
		return '_'
	}, s)
}
