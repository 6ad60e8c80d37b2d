package wanem

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

type iperfResult struct {
	End struct {
		SumReceived struct {
			BitsPerSecond float64 `json:"bits_per_second"`
		} `json:"sum_received"`
		CPU struct {
			HostTotal   float64 `json:"host_total"`
			RemoteTotal float64 `json:"remote_total"`
		} `json:"cpu_utilization_percent"`
	} `json:"end"`
}

// iperf3TCP runs an iperf3 server in B and a client in A for secs seconds.
func iperf3TCP(t testing.TB, p *pair, secs int, extra ...string) iperfResult {
	t.Helper()
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Skip("iperf3 not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(secs+30)*time.Second)
	defer cancel()
	srv := exec.CommandContext(ctx, "nsenter", "--net=/run/netns/"+p.nsB, "--", "iperf3", "-s", "-B", p.addrB.String())
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	var out string
	for try := 0; ; try++ {
		cmd := exec.CommandContext(ctx, "nsenter", append([]string{"--net=/run/netns/" + p.nsA, "--", "iperf3", "-J", "-c", p.addrB.String(), "-t", itoa(secs)}, extra...)...)
		b, err := cmd.Output()
		var probe struct {
			Error string `json:"error"`
		}
		if err == nil && json.Unmarshal(b, &probe) == nil && probe.Error == "" {
			out = string(b)
			break
		}
		if try > 50 || ctx.Err() != nil {
			t.Fatalf("iperf3 client: %v: %s", err, b)
		}
		time.Sleep(100 * time.Millisecond) // server start-up; bounded by the tries
	}
	var r iperfResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func itoa(i int) string { return fmtInt(int64(i)) }

func fmtInt(i int64) string {
	b, _ := json.Marshal(i)
	return string(b)
}

func TestExperimentRaw(t *testing.T) {
	if os.Getenv("WANEM_EXPERIMENT") == "" {
		t.Skip("WANEM_EXPERIMENT unset")
	}
	for _, c := range []struct {
		name string
		opts Options
	}{
		{"offload-mtu9000", Options{MTU: 9000}},
		{"nooffload-mtu9000", Options{MTU: 9000, NoOffload: true}},
		{"offload-mtu1500", Options{MTU: 1500}},
		{"nooffload-mtu1500", Options{MTU: 1500, NoOffload: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPair(t, Config{}, c.opts)
			r := iperf3TCP(t, p, 5)
			st := p.link.Stats()
			t.Logf("%s: %s cpu host %.0f%% remote %.0f%%; aToB packets %d segments %d split %d",
				c.name, fmtBps(r.End.SumReceived.BitsPerSecond), r.End.CPU.HostTotal, r.End.CPU.RemoteTotal,
				st.AtoB.Packets, st.AtoB.Segments, st.AtoB.SplitPackets)
		})
	}
}

func TestExperimentRated(t *testing.T) {
	if os.Getenv("WANEM_EXPERIMENT") == "" {
		t.Skip("WANEM_EXPERIMENT unset")
	}
	for _, c := range []struct {
		name  string
		delay time.Duration
		opts  Options
	}{
		{"1G-0ms-offload", 0, Options{}},
		{"1G-0ms-nooffload", 0, Options{NoOffload: true}},
		{"1G-25ms-offload", 25 * time.Millisecond, Options{}},
		{"1G-25ms-nooffload", 25 * time.Millisecond, Options{NoOffload: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPair(t, Symmetric(Direction{RateBitsPerSecond: 1e9, Delay: c.delay}), c.opts)
			cpu0 := selfCPU()
			r := iperf3TCP(t, p, 8, "-O", "2")
			cpu := selfCPU() - cpu0
			st := p.link.Stats()
			t.Logf("emulator CPU %.2f s for %.2f GB: %.2f s/GB", cpu.Seconds(), float64(st.AtoB.DeliveredBytes)/1e9, cpu.Seconds()/(float64(st.AtoB.DeliveredBytes)/1e9))
			b, _ := json.MarshalIndent(st, "", " ")
			t.Logf("%s: %s cpu host %.0f%% remote %.0f%% lateness a→b mean %v max %v hist %v; b→a mean %v max %v hist %v", c.name, fmtBps(r.End.SumReceived.BitsPerSecond), r.End.CPU.HostTotal, r.End.CPU.RemoteTotal, st.AtoB.LatenessMean, st.AtoB.LatenessMax, st.AtoB.LatenessHistogram, st.BtoA.LatenessMean, st.BtoA.LatenessMax, st.BtoA.LatenessHistogram)
			_ = b
		})
	}
}

// pingRTT pings b from a and returns min, avg, max (ms).
func pingRTT(t testing.TB, p *pair, count int, interval string) (float64, float64, float64, float64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := runIn(t, ctx, p.nsA, "ping", "-q", "-c", itoa(count), "-i", interval, p.addrB.String())
	var mn, avg, mx, mdev float64
	i := strings.Index(out, "rtt min/avg/max/mdev = ")
	if i < 0 {
		t.Fatalf("no rtt in ping output: %s", out)
	}
	if _, err := fmt.Sscanf(out[i+len("rtt min/avg/max/mdev = "):], "%f/%f/%f/%f", &mn, &avg, &mx, &mdev); err != nil {
		t.Fatalf("parse %q: %v", out, err)
	}
	return mn, avg, mx, mdev
}

func TestExperimentPing(t *testing.T) {
	if os.Getenv("WANEM_EXPERIMENT") == "" {
		t.Skip("WANEM_EXPERIMENT unset")
	}
	for _, rt := range []bool{false, true} {
		for _, delay := range []time.Duration{0, 25 * time.Millisecond} {
			p := newPair(t, Symmetric(Direction{RateBitsPerSecond: 1e9, Delay: delay}), Options{Realtime: rt})
			mn, avg, mx, mdev := pingRTT(t, p, 500, "0.01")
			st := p.link.Stats()
			t.Logf("rt=%v delay=%v idle: min %.3f avg %.3f max %.3f mdev %.3f; lateness %v/%v %v", rt, delay, mn, avg, mx, mdev, st.AtoB.LatenessMean, st.AtoB.LatenessMax, st.AtoB.LatenessHistogram)
		}
	}
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	if os.Getenv("WANEM_CPU_SPLIT") != "" {
		fmt.Printf("user %v sys %v\n", time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano()))
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestExperimentLoss(t *testing.T) {
	if os.Getenv("WANEM_EXPERIMENT") == "" {
		t.Skip("WANEM_EXPERIMENT unset")
	}
	for _, loss := range []float64{1e-3, 1e-2} {
		p := newPair(t, Symmetric(Direction{RateBitsPerSecond: 1e9, Delay: 5 * time.Millisecond, Loss: loss}), Options{})
		r := iperf3TCP(t, p, 5)
		st := p.link.Stats()
		t.Logf("loss %g: %s; a→b segs %d lost %d (%.5f) split %d malformed %d writeErr %d", loss, fmtBps(r.End.SumReceived.BitsPerSecond), st.AtoB.Segments, st.AtoB.LostSegments, st.AtoB.LossRatio(), st.AtoB.SplitPackets, st.AtoB.Malformed, st.AtoB.WriteErrors)
	}
}
