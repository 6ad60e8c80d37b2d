package e2e

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

var resend = flag.Bool("resend", false, "measure what kill -9 of either side costs in data sent again (make bench-resend; minutes)")

// TestResendAfterKills measures the data sent beyond the dataset when one side is
// killed with SIGKILL five times during a ~900 MB transfer and restarted (the
// receiver on the same address, the sender with the same command), for each side in
// turn. It prints the figures docs/benchmarks.md records and checks that the
// destination ends byte-identical. -resend runs it (make bench-resend).
func TestResendAfterKills(t *testing.T) {
	if !*resend {
		t.Skip("-resend not set")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	var spec []fileSpec
	for i := range 6 {
		spec = append(spec, fileSpec{path: fmt.Sprintf("r/large/L%d", i), size: 128 << 20})
	}
	for i := range 512 {
		spec = append(spec, fileSpec{path: fmt.Sprintf("r/small/%03d", i), size: 256 << 10})
	}
	base := os.Getenv("DTNFLOW_RESEND_DIR") // a tmpfs keeps the disk out of the figure
	if base == "" {
		base = t.TempDir()
	}
	for _, victim := range []string{"receiver", "sender"} {
		t.Run(victim, func(t *testing.T) {
			dir, err := os.MkdirTemp(base, "resend")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(dir)
			src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
			os.MkdirAll(dst, 0o755)
			total := makeTree(t, src, seed, spec)
			key := writeSecret(t, dir, "key", secret)
			recv := start(t, nil, "receive", "--listen", "127.0.0.1:0", "--root", dst, "--secret-file", key)
			addr := recv.waitListening()
			args := []string{"send", "--to", addr, "--root", src, "--secret-file", key, "--retry-for", "60s", "--streams", "4", "--max-rate", "400M", "r"}
			send := start(t, nil, args...)
			rng := rand.New(rand.NewPCG(seed, 5))
			var sent int64
			sentBy := func(p *proc) int64 {
				if m := sentRE.FindStringSubmatch(p.stdoutText()); m != nil {
					v, _ := strconv.ParseInt(m[1], 10, 64)
					return v
				}
				return -1
			}
			received := func() int64 { return receivedBytes(t, addr) }
			var lastRecv int64 // what earlier receiver processes received (each counts from 0)
			for k := range 5 {
				frac := (float64(k) + 0.2 + 0.6*rng.Float64()) / 5.5
				target := int64(frac * float64(total))
				pollUntil(t, 120*time.Second, "progress", func() bool { return send.exited() || lastRecv+received() >= target })
				if victim == "sender" {
					lastRecv = 0 // one receiver throughout: its counter is the progress
				}
				if send.exited() {
					break
				}
				if victim == "receiver" {
					lastRecv += max(received(), 0)
					recv.kill()
					t.Logf("kill %d of the receiver at %d bytes received", k+1, lastRecv)
					recv = start(t, nil, "receive", "--listen", addr, "--root", dst, "--secret-file", key)
					recv.waitListening()
				} else {
					// What the sender wrote into its sockets, in flight included.
					wrote := int64(metricAt(t, send.metricsAddr(), `dtnflow_agent_bytes_total{direction="sent"}`))
					sent += wrote
					send.kill()
					t.Logf("kill %d of the sender at %d bytes received; it had sent %d", k+1, received(), wrote)
					send = start(t, nil, args...)
				}
			}
			if err := send.wait(300 * time.Second); err != nil {
				t.Fatalf("send: %v\n%s", err, send.output())
			}
			if v := sentBy(send); v >= 0 {
				sent += v
			}
			assertSameTree(t, src, dst, "r")
			t.Logf("RESULT victim=%s kills=5 dataset=%d sent=%d resent=%.1f%%", victim, total, sent, 100*float64(sent-total)/float64(total))
		})
	}
}
