package wanem

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The accuracy runs take minutes and use both cores, so they run only when asked:
//
//	flock /tmp/dtnflow-bench.lock go test ./test/wanem -run Accuracy -v -wanem.accuracy
//
// Their figures are recorded in docs/benchmarks.md (## WAN emulator).
var accuracy = flag.Bool("wanem.accuracy", false, "run the emulator accuracy measurements (iperf3, ping; minutes)")

func requireAccuracy(t *testing.T) {
	t.Helper()
	if !*accuracy {
		t.Skip("accuracy runs need -wanem.accuracy")
	}
	requireEmulation(t)
	for _, tool := range []string{"iperf3", "ping"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (apt-get install iperf3 iputils-ping)", tool)
		}
	}
}

// iperf3Result is the part of iperf3's JSON the accuracy runs read.
type iperf3Result struct {
	Error string `json:"error"`
	End   struct {
		SumReceived struct {
			BitsPerSecond float64 `json:"bits_per_second"`
		} `json:"sum_received"`
		SumSent struct {
			Retransmits int `json:"retransmits"`
		} `json:"sum_sent"`
		Sum struct { // UDP: the receiver's view
			Packets     int64   `json:"packets"`
			LostPackets int64   `json:"lost_packets"`
			LostPercent float64 `json:"lost_percent"`
		} `json:"sum"`
	} `json:"end"`
}

// endpointsRealtime runs the iperf3 endpoints under SCHED_FIFO (chrt), so that other
// work on the machine does not starve them and the figures measure the emulator.
var endpointsRealtime = flag.Bool("wanem.rt-endpoints", false, "run iperf3 under chrt -f in the accuracy runs")

// iperf3 runs a server in B and a client in A with args and returns the client's report.
func iperf3(t *testing.T, p *pair, secs int, args ...string) iperf3Result {
	t.Helper()
	rt := []string{}
	if *endpointsRealtime {
		rt = []string{"chrt", "-f", "5"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(secs+60)*time.Second)
	defer cancel()
	srv := exec.CommandContext(ctx, "nsenter", append(append([]string{"--net=/run/netns/" + p.nsB, "--"}, rt...), "iperf3", "-s", "-B", p.addrB.String())...)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	full := append(append(append([]string{"--net=/run/netns/" + p.nsA, "--"}, rt...), "iperf3", "-J", "-c", p.addrB.String(), "-t", strconv.Itoa(secs)), args...)
	for try := 0; ; try++ {
		out, err := exec.CommandContext(ctx, "nsenter", full...).Output()
		var r iperf3Result
		if jerr := json.Unmarshal(out, &r); err == nil && jerr == nil && r.Error == "" {
			return r
		}
		if try >= 50 || ctx.Err() != nil {
			t.Fatalf("iperf3 %v: %v: %s", args, err, out)
		}
		time.Sleep(100 * time.Millisecond) // the server is starting; bounded by the tries
	}
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestAccuracyThroughput(t *testing.T) {
	requireAccuracy(t)
	for _, c := range []struct {
		cc   string
		opts Options
		// judged: the defaults (offloads, ordinary scheduling); the others are
		// measured for the comparison in the package doc.
		judged bool
	}{
		{"cubic", Options{}, true}, {"bbr", Options{}, true},
		{"cubic", Options{Realtime: true}, false}, {"bbr", Options{Realtime: true}, false},
		{"cubic", Options{NoOffload: true}, false}, {"cubic", Options{NoOffload: true, Realtime: true}, false},
	} {
		name := fmt.Sprintf("%s offload=%v realtime=%v", c.cc, !c.opts.NoOffload, c.opts.Realtime)
		t.Run(name, func(t *testing.T) {
			// Three runs, because the machine is shared: a neighbour's burst of work
			// starves the iperf3 endpoints and drains the bottleneck queue. The link can
			// deliver the rate if one run gets it.
			var runs []float64
			for range 3 {
				p := newPair(t, Symmetric(Direction{RateBitsPerSecond: 1e9}), c.opts)
				cpu0 := processCPU()
				r := iperf3(t, p, 10, "-O", "2", "-C", c.cc)
				cpu := processCPU() - cpu0
				st := p.link.Stats().AtoB
				got := r.End.SumReceived.BitsPerSecond
				runs = append(runs, got)
				t.Logf("ACCURACY throughput 1Gbit/s 0ms loss 0 %s rt-endpoints=%v: %.1f Mbit/s = %.1f%% of the rate; emulator process CPU %.2f s/GB (includes the receiving stacks' softirq work); write lateness mean %v",
					name, *endpointsRealtime, got/1e6, got/1e7, cpu.Seconds()/(float64(st.DeliveredBytes)/1e9), st.LatenessMean)
				p.link.Close()
			}
			sort.Float64s(runs)
			t.Logf("ACCURACY throughput %s: min %.1f median %.1f max %.1f Mbit/s", name, runs[0]/1e6, runs[1]/1e6, runs[2]/1e6)
			if c.judged && runs[2] < 0.95e9 {
				t.Errorf("best of three %.1f Mbit/s through a 1 Gbit/s link: below 95%%", runs[2]/1e6)
			}
		})
	}
}

func TestAccuracyRTT(t *testing.T) {
	requireAccuracy(t)
	for _, rt := range []bool{false, true} {
		t.Run(fmt.Sprintf("realtime=%v", rt), func(t *testing.T) {
			p := newPair(t, Symmetric(Direction{RateBitsPerSecond: 1e9, Delay: 25 * time.Millisecond}), Options{Realtime: rt})
			rtts := pingSamples(t, p.nsA, p.addrB, 1000, "0.01")
			if len(rtts) < 990 {
				t.Fatalf("only %d of 1000 pings answered", len(rtts))
			}
			var sum time.Duration
			for _, r := range rtts {
				sum += r
			}
			mean := sum / time.Duration(len(rtts))
			st := p.link.Stats()
			t.Logf("ACCURACY rtt 50ms realtime=%v: mean %v median %v min %v p99 %v max %v; write lateness mean %v/%v",
				rt, mean.Round(time.Microsecond), rtts[len(rtts)/2], rtts[0], rtts[len(rtts)*99/100], rtts[len(rtts)-1],
				st.AtoB.LatenessMean, st.BtoA.LatenessMean)
			if d := mean - 50*time.Millisecond; d < 0 || d > time.Millisecond {
				t.Errorf("mean RTT %v, configured 50ms: off by more than 1ms", mean)
			}
		})
	}
}

func TestAccuracyLoss(t *testing.T) {
	requireAccuracy(t)
	for _, c := range []struct {
		name string
		d    Direction
		secs int
	}{
		// 12 500 datagrams a second: 1e-2 sees ~1 250 losses in 10 s, 1e-3 ~1 000 in
		// 80 s (a standard deviation of about 3%).
		{"random 1e-2", Direction{Loss: 1e-2}, 10},
		{"random 1e-3", Direction{Loss: 1e-3}, 80},
		{"gilbert-elliott mean 1e-2", Direction{GilbertElliott: &GilbertElliott{P: 0.0025, R: 0.25, LossBad: 1}}, 30},
	} {
		t.Run(c.name, func(t *testing.T) {
			// No rate limit: a bottleneck queue would add drops of its own whenever the
			// sender bursts (and a busy machine makes iperf3 burst).
			d := c.d
			d.Delay = 5 * time.Millisecond
			p := newPair(t, Config{AtoB: d, BtoA: Direction{Delay: 5 * time.Millisecond}, Seed: 11}, Options{})
			r := iperf3(t, p, c.secs, "-u", "-b", "800M", "-l", "8000", "-w", "4M")
			st := p.link.Stats().AtoB
			want := d.MeanLoss()
			measured := float64(r.End.Sum.LostPackets) / float64(r.End.Sum.Packets)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			rcvbuf := runIn(t, ctx, p.nsB, "nstat", "-az", "UdpRcvbufErrors")
			t.Logf("ACCURACY loss %s: configured %.4g, iperf3 receiver %d/%d lost = %.4g (%+.1f%%), emulator lost %d/%d = %.4g; queue drops %d, not read in time by the emulator %d; receiver socket overflows: %s",
				c.name, want, r.End.Sum.LostPackets, r.End.Sum.Packets, measured, 100*(measured-want)/want,
				st.LostSegments, st.Segments, st.LossRatio(), st.QueueDroppedSegments, st.KernelDropped, strings.Join(strings.Fields(rcvbuf), " "))
			if math.Abs(measured-want)/want > 0.10 {
				t.Errorf("measured loss %.4g, configured %.4g: off by more than 10%%", measured, want)
			}
		})
	}
}

// TestAccuracyUnlimited is the capacity of the emulator itself: no rate limit, no
// delay, one TCP stream; offloads against packet-at-a-time, at MTU 9000 and 1500.
func TestAccuracyUnlimited(t *testing.T) {
	requireAccuracy(t)
	for _, c := range []struct {
		mtu     int
		offload bool
	}{{9000, true}, {1500, true}, {9000, false}, {1500, false}} {
		name := fmt.Sprintf("mtu=%d offload=%v", c.mtu, c.offload)
		t.Run(name, func(t *testing.T) {
			p := newPair(t, Config{}, Options{MTU: c.mtu, NoOffload: !c.offload})
			cpu0 := processCPU()
			r := iperf3(t, p, 5, "-C", "cubic")
			cpu := processCPU() - cpu0
			st := p.link.Stats().AtoB
			t.Logf("ACCURACY unlimited %s: %.2f Gbit/s; %d reads for %d segments; emulator process CPU %.2f s/GB",
				name, r.End.SumReceived.BitsPerSecond/1e9, st.Packets, st.Segments, cpu.Seconds()/(float64(st.DeliveredBytes)/1e9))
		})
	}
}
