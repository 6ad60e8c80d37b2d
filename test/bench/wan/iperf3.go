package wan

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"syscall"
	"time"
)

// Iperf3 is the reference line: memory-to-memory TCP from src to dst, one run per
// stream count, for Seconds each. It moves no files; its rows say what the path gives
// a tuned memory-to-memory sender.
type Iperf3 struct {
	Streams []int
	Seconds int
}

// Name is the row label.
func (Iperf3) Name() string { return "iperf3" }

// iperf3Port is where the reference server listens in dst.
const iperf3Port = 5301

// Run runs iperf3 once per stream count.
func (r Iperf3) Run(ctx context.Context, env *Env) ([]Result, error) {
	var out []Result
	for _, n := range r.Streams {
		res, err := r.once(ctx, env, n)
		if err != nil {
			return out, err
		}
		out = append(out, res)
	}
	return out, nil
}

func (r Iperf3) once(ctx context.Context, env *Env, streams int) (Result, error) {
	port := strconv.Itoa(iperf3Port)
	srv, err := start(ctx, env.Dst, "iperf3", "-s", "-1", "-B", env.Dst.Addr.String(), "-p", port)
	if err != nil {
		return Result{}, err
	}
	defer srv.stop(2 * time.Second)
	if err := WaitListening(ctx, env.Dst, iperf3Port); err != nil {
		return Result{}, err
	}
	res := Result{Tool: r.Name(), Streams: streams, Parallelism: streams, Chosen: true, Started: time.Now(),
		Config: fmt.Sprintf("-P %d -t %d", streams, r.Seconds), Note: "memory to memory"}
	_, ccpu, text, err := runTimed(ctx, env.Src, "iperf3", 0, "-c", env.Dst.Addr.String(), "-p", port,
		"-P", strconv.Itoa(streams), "-t", strconv.Itoa(r.Seconds), "-J")
	if err != nil {
		return res, err
	}
	var rep struct {
		Error string `json:"error"`
		End   struct {
			SumReceived struct {
				Bytes   float64 `json:"bytes"`
				Seconds float64 `json:"seconds"`
			} `json:"sum_received"`
			SumSent struct {
				Retransmits int64 `json:"retransmits"`
			} `json:"sum_sent"`
		} `json:"end"`
	}
	if err := json.Unmarshal([]byte(text), &rep); err != nil || rep.Error != "" {
		return res, fmt.Errorf("iperf3: %v %s: %s", err, rep.Error, tail(text, 500))
	}
	// The one-off server exits after the test; its rusage is its CPU.
	select {
	case <-srv.waited:
	case <-time.After(5 * time.Second):
	}
	var scpu float64
	if srv.cmd.ProcessState != nil {
		ru := srv.cmd.ProcessState.SysUsage().(*syscall.Rusage)
		scpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
	res.Bytes = int64(rep.End.SumReceived.Bytes)
	res.Seconds = rep.End.SumReceived.Seconds
	res.Retransmits = rep.End.SumSent.Retransmits
	res.finish(env, ccpu+scpu)
	return res, nil
}
