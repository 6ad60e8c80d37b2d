package wan

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// DtnflowConfig is one fixed setting of dtnflow-agent send.
type DtnflowConfig struct {
	Streams int
	Stripes int
	Buffer  int64 // --buffer (0: the kernel autotunes)
}

func (c DtnflowConfig) args() []string {
	a := []string{"--streams", strconv.Itoa(c.Streams), "--stripes", strconv.Itoa(c.Stripes)}
	if c.Buffer > 0 {
		a = append(a, "--buffer", strconv.FormatInt(c.Buffer, 10))
	}
	return a
}

func (c DtnflowConfig) String() string { return strings.Join(c.args(), " ") }

// DtnflowMode says which dtnflow row a runner makes.
type DtnflowMode string

const (
	DtnflowGrid DtnflowMode = "dtnflow-grid"
	DtnflowAuto DtnflowMode = "dtnflow-auto"
	// DtnflowFixed runs Grid's first setting on the whole dataset, probing nothing
	// (a setting found before, e.g. by the grid on the same path).
	DtnflowFixed DtnflowMode = "dtnflow-fixed"
)

// Dtnflow runs dtnflow-agent receive in dst and dtnflow-agent send in src: over a
// fixed grid (each point probed on the sample dataset, the best rerun on the whole),
// or with --auto (its own probing counts in its time).
type Dtnflow struct {
	Mode  DtnflowMode
	Agent string // path of the dtnflow-agent binary
	Grid  []DtnflowConfig
	// MaxStripes and MaxStreams bound --auto.
	MaxStripes, MaxStreams int
	// Verify keeps the agent's end-to-end digest (read back at the destination);
	// false compares like for like with globus-url-copy, which checks nothing.
	Verify bool
	// Label, when set, names the row instead of the mode; Extra are more flags of
	// send (dtnflow-auto-static: --auto with --class-moves=false).
	Label string
	Extra []string
	// Encrypt sends with --in-flight Encrypted (the default between sites); its rows
	// are named with "+enc".
	Encrypt bool
}

// Name is the row label.
func (d Dtnflow) Name() string {
	if d.Label != "" {
		return d.Label
	}
	if d.Encrypt {
		return string(d.Mode) + "+enc"
	}
	return string(d.Mode)
}

const dtnflowPort = 7300

// DefaultDtnflowGrid is streams × stripes × buffers.
func DefaultDtnflowGrid(streams, stripes []int, bufs []int64) []DtnflowConfig {
	var g []DtnflowConfig
	for _, k := range stripes {
		for _, s := range streams {
			for _, b := range bufs {
				g = append(g, DtnflowConfig{Streams: s, Stripes: k, Buffer: b})
			}
		}
	}
	return g
}

// Run transfers the dataset as the mode says.
func (d Dtnflow) Run(ctx context.Context, env *Env) ([]Result, error) {
	if _, err := os.Stat(d.Agent); err != nil {
		return nil, fmt.Errorf("dtnflow-agent binary: %w", err)
	}
	key := filepath.Join(env.WorkDir, "dtnflow.key")
	if err := os.WriteFile(key, []byte("bench-wan-shared-secret-0123456789\n"), 0o600); err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp(env.WorkDir, "dtnflow-dst-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(root)
	listen := fmt.Sprintf("%s:%d", env.Dst.Addr, dtnflowPort)
	recv, err := start(ctx, env.Dst, d.Agent, "receive", "--listen", listen, "--root", root, "--secret-file", key)
	if err != nil {
		return nil, err
	}
	defer recv.stop(5 * time.Second)
	if err := WaitListening(ctx, env.Dst, dtnflowPort); err != nil {
		return nil, fmt.Errorf("%w: %s", err, tail(recv.out.String(), 500))
	}
	run := 0
	var lastOut string
	send := func(ds *Dataset, extra []string) (Result, error) {
		run++
		job := fmt.Sprintf("bench%d", run)
		res := Result{Tool: d.Name(), Bytes: ds.Total, Files: ds.Count(), Started: time.Now()}
		args := append([]string{"send", "--to", listen, "--root", filepath.Dir(ds.Root), "--secret-file", key,
			"--job", job, "--dest-path", job, "--verify=" + strconv.FormatBool(d.Verify)}, extra...)
		if d.Encrypt {
			args = append(args, "--in-flight", "Encrypted")
		}
		args = append(args, filepath.Base(ds.Root))
		before := env.linkStats()
		r0 := recv.cpu()
		wall, scpu, out, err := runTimed(ctx, env.Src, d.Agent, env.RunLimit, args...)
		lastOut = out
		env.saveLog(fmt.Sprintf("%s-%d-%s", d.Name(), run, strings.Join(extra, "")), out)
		if err != nil && !errors.Is(err, errRunLimit) {
			return res, err
		}
		rcpu := recv.cpu() - r0
		after := env.linkStats()
		res.Seconds = wall
		cpuScale := 1.0
		if errors.Is(err, errRunLimit) {
			moved, files, _ := moved(filepath.Join(root, job), ds)
			cpuScale = res.partial(ds, moved, files, wall)
		} else if got, err := treeBytes(filepath.Join(root, job)); err != nil || got < ds.Total {
			return res, fmt.Errorf("dtnflow-agent %s wrote %d bytes of %d (%v): %s", strings.Join(extra, " "), got, ds.Total, err, tail(out, 300))
		}
		_ = os.RemoveAll(filepath.Join(root, job))
		_ = os.RemoveAll(filepath.Join(root, ".dtnflow", job))
		res.LinkLost = after.LostSegments - before.LostSegments
		res.LinkDropped = after.QueueDroppedSegments - before.QueueDroppedSegments
		res.finish(env, (scpu+rcpu)*cpuScale)
		return res, nil
	}

	if d.Mode == DtnflowAuto {
		extra := append([]string{"--auto", "--stripes", strconv.Itoa(d.MaxStripes), "--max-streams", strconv.Itoa(d.MaxStreams)}, d.Extra...)
		r, err := send(env.Dataset, extra)
		r.Config, r.Chosen = strings.Join(extra, " "), true
		r.addNote("probing included in its time")
		probes, plan := parseAutoLog(lastOut)
		if cl := parseClassLog(lastOut); cl.scheduler != "" {
			r.addNote(fmt.Sprintf("size classes by %s, %d channel(s) moved in %d move(s)", cl.scheduler, cl.channelsMoved, cl.moves))
		}
		if plan.Streams > 0 {
			r.Streams, r.Stripes, r.BufferBytes = plan.Streams*plan.Stripes, plan.Stripes, plan.Buffer
			r.Config += fmt.Sprintf(" → %d stripes × %d streams", plan.Stripes, plan.Streams)
			if plan.Buffer > 0 {
				r.Config += fmt.Sprintf(", buffer %s", humanBytes(plan.Buffer))
			}
		}
		var out []Result
		for _, pr := range probes {
			pr.Tool, pr.Scenario, pr.Started = d.Name(), env.Scenario.Name(), r.Started
			if rate := env.LinkBitsPerSecond(); rate > 0 {
				pr.PercentOfLink = 100 * pr.BitsPerSecond / rate
			}
			out = append(out, pr)
		}
		return append(out, r), err
	}
	if d.Mode == DtnflowFixed {
		if len(d.Grid) == 0 {
			return nil, fmt.Errorf("dtnflow-fixed: no setting")
		}
		cfg := d.Grid[0]
		r, err := send(env.Dataset, cfg.args())
		r.Config, r.Chosen = cfg.String(), true
		r.Streams, r.Stripes, r.BufferBytes = cfg.Streams*cfg.Stripes, cfg.Stripes, cfg.Buffer
		return []Result{r}, err
	}
	var out []Result
	var probe float64
	var best *Result
	var bestCfg DtnflowConfig
	for _, cfg := range d.Grid {
		r, err := send(env.SampleDataset, cfg.args())
		if err != nil {
			return out, err
		}
		r.Config, r.Sample = cfg.String(), true
		r.Streams, r.Stripes, r.BufferBytes = cfg.Streams*cfg.Stripes, cfg.Stripes, cfg.Buffer
		probe += r.Seconds
		out = append(out, r)
		fmt.Fprintf(env.Log, "    sample %-40s %8.1f Mbit/s\n", cfg, r.BitsPerSecond/1e6)
		if best == nil || r.BitsPerSecond > best.BitsPerSecond {
			best, bestCfg = &out[len(out)-1], cfg
		}
	}
	if best == nil {
		return nil, fmt.Errorf("dtnflow-grid: empty grid")
	}
	r, err := send(env.Dataset, bestCfg.args())
	r.Config, r.Chosen, r.ProbeSeconds = bestCfg.String(), true, probe
	r.Streams, r.Stripes, r.BufferBytes = bestCfg.Streams*bestCfg.Stripes, bestCfg.Stripes, bestCfg.Buffer
	r.addNote(fmt.Sprintf("best of %d settings probed on %s (%.0f s of probing)", len(d.Grid), humanBytes(env.SampleDataset.Total), probe))
	return append(out, r), err
}

// parseAutoLog reads what `send --auto` logged (slog text): its memory-to-memory probe
// samples ("Probe sample": streams, buffer, rate) and its plan ("Planned": stripes,
// streams per stripe, buffer).
func parseAutoLog(out string) (probes []Result, plan DtnflowConfig) {
	for _, line := range strings.Split(out, "\n") {
		kv := slogFields(line)
		switch kv["msg"] {
		case "Probe sample":
			n, _ := strconv.Atoi(kv["streams"])
			k, _ := strconv.Atoi(kv["stripes"])
			k = max(k, 1)
			buf, _ := strconv.ParseInt(kv["bufferBytes"], 10, 64)
			secs, _ := strconv.ParseFloat(kv["seconds"], 64)
			bps := parseHumanRate(kv["rate"])
			if n > 0 && bps > 0 {
				probes = append(probes, Result{Config: fmt.Sprintf("probe %s: %d stripe(s) × %d stream(s)", kv["phase"], k, n), Streams: k * n, Stripes: k,
					BufferBytes: buf, Sample: true, BitsPerSecond: bps, Seconds: secs, Note: "probe sample of send --auto (" + kv["ended"] + ")"})
			}
		case "Planned":
			plan.Stripes, _ = strconv.Atoi(kv["stripes"])
			plan.Streams, _ = strconv.Atoi(kv["streams"])
			plan.Buffer, _ = strconv.ParseInt(kv["bufferBytes"], 10, 64)
		}
	}
	return probes, plan
}

// classLog is what send --auto's log says of its size classes at run time.
type classLog struct {
	scheduler            string // SC, MC, ProMC (the last named)
	moves, channelsMoved int
}

// parseClassLog reads the scheduler from the plan's log line (or the small files'
// early classes) and counts the coordinator's channel moves.
func parseClassLog(out string) classLog {
	var cl classLog
	for _, line := range strings.Split(out, "\n") {
		kv := slogFields(line)
		switch kv["msg"] {
		case "Planned", "Small files: size classes from the first sample":
			if kv["scheduler"] != "" {
				cl.scheduler = kv["scheduler"]
			}
		case "Moved channels between size classes":
			n, _ := strconv.Atoi(kv["channels"])
			cl.moves++
			cl.channelsMoved += n
		}
	}
	return cl
}

// slogFields splits a log/slog text line into its key=value pairs (values may be
// double-quoted with Go escapes).
func slogFields(line string) map[string]string {
	kv := map[string]string{}
	for len(line) > 0 {
		line = strings.TrimLeft(line, " ")
		eq := strings.IndexByte(line, '=')
		if eq <= 0 {
			break
		}
		key, rest := line[:eq], line[eq+1:]
		var val string
		if strings.HasPrefix(rest, `"`) {
			end := 1
			for end < len(rest) && (rest[end] != '"' || rest[end-1] == '\\') {
				end++
			}
			if uq, err := strconv.Unquote(rest[:min(end+1, len(rest))]); err == nil {
				val = uq
			}
			line = rest[min(end+1, len(rest)):]
		} else {
			sp := strings.IndexByte(rest, ' ')
			if sp < 0 {
				sp = len(rest)
			}
			val, line = rest[:sp], rest[sp:]
		}
		kv[key] = val
	}
	return kv
}

// parseHumanRate reads "812.3 Mbit/s", "1.02 Gbit/s" or "900 kbit/s".
func parseHumanRate(s string) float64 {
	f := strings.Fields(s)
	if len(f) != 2 {
		return 0
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0
	}
	switch f[1] {
	case "Gbit/s":
		return v * 1e9
	case "Mbit/s":
		return v * 1e6
	case "kbit/s":
		return v * 1e3
	}
	return 0
}
