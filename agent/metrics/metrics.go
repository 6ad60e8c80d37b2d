// Package metrics holds everything dtnflow-agent measures: the Prometheus metrics
// (registered once, on a registry of their own), TCP_INFO of a connection, and the
// process's own CPU time. Label sets are bounded: stripe and stream indices, and the four
// size classes.
package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"runtime/pprof"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sys/unix"
)

// Registry holds the agent's metrics.
var Registry = prometheus.NewRegistry()

var (
	// BytesTotal counts payload bytes by direction (sent, received, discarded).
	BytesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dtnflow_agent_bytes_total", Help: "Payload bytes moved, by direction (sent, received, memory).",
	}, []string{"direction"})
	// FilesTotal counts files made final (receiver) or confirmed (sender).
	FilesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dtnflow_agent_files_total", Help: "Files complete and verified, by role.",
	}, []string{"role"})
	// StreamBitsPerSecond is what each stream delivered over the last second.
	StreamBitsPerSecond = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dtnflow_agent_stream_bits_per_second", Help: "Rate at which each TCP stream delivered data (acknowledged by the receiver, selectively acknowledged bytes included) over the last second.",
	}, []string{"stripe", "stream"})
	// StripeBitsPerSecond is what each stripe delivered over the last second.
	StripeBitsPerSecond = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dtnflow_agent_stripe_bits_per_second", Help: "Rate at which each stripe delivered data (acknowledged by the receiver, selectively acknowledged bytes included) over the last second.",
	}, []string{"stripe"})
	// RTTSeconds is the smoothed TCP round-trip time of a stripe (mean over streams).
	RTTSeconds = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dtnflow_agent_tcp_rtt_seconds", Help: "Smoothed TCP RTT from TCP_INFO, mean over a stripe's streams.",
	}, []string{"stripe"})
	// LossRatio is retransmitted over sent segments in the last second.
	LossRatio = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dtnflow_agent_tcp_loss_ratio", Help: "Retransmitted segments over segments sent in the last second (TCP_INFO).",
	}, []string{"stripe"})
	// RetransmitsTotal counts retransmitted segments.
	RetransmitsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dtnflow_agent_tcp_retransmits_total", Help: "Retransmitted TCP segments (TCP_INFO), by stripe.",
	}, []string{"stripe"})
	// AuthRefused counts connections refused before any frame was read.
	AuthRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dtnflow_agent_connections_refused_total", Help: "Connections refused before any frame was read, by reason (auth: wrong secret; protocol: not the dtnflow handshake or too slow; busy: too many connections not yet authenticated).",
	}, []string{"reason"})
	// IntegrityFailures counts frames that arrived other than they were sent.
	IntegrityFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dtnflow_agent_integrity_failures_total", Help: "Frames whose tag did not match or whose header broke the protocol (corrupted or tampered with in flight); each ended its session and what it carried was sent again.",
	})
	// Stalls counts sessions ended because they made no progress for the stall timeout.
	Stalls = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dtnflow_agent_stalls_total", Help: "Stripe sessions ended (and retried) because nothing progressed for the stall timeout.",
	})
	// VerifyFailures counts chunks or files whose end-to-end digest did not match.
	VerifyFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dtnflow_agent_verify_failures_total", Help: "Chunks or files whose end-to-end digest did not match; each was sent again.",
	})
	// Resent counts blocks and files sent again.
	Resent = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dtnflow_agent_resent_total", Help: "Blocks and files the sender sent again after a failed check.",
	})
	// ChannelMovesTotal counts channels a coordinator moved between size classes while
	// its job ran (SC, MC, ProMC of Arslan & Kosar), by the classes they left and joined.
	ChannelMovesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dtnflow_agent_channel_moves_total", Help: "Channels a coordinator moved from one size class to another while the job ran (a finished class's handed on, or one from a fast class to a slow one), by class.",
	}, []string{"from", "to"})
	// ClassChannels is each size class's channels per stripe now.
	ClassChannels = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dtnflow_agent_class_channels", Help: "Channels (files in flight at once per stripe) each size class has now, as the coordinator's scheduler set them.",
	}, []string{"class"})
	// CPUSecondsTotal is the agent's own CPU time (user + system).
	CPUSecondsTotal = prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "dtnflow_agent_cpu_seconds_total", Help: "CPU seconds used by this agent (user + system).",
	}, CPUSeconds)
)

func init() {
	Registry.MustRegister(BytesTotal, FilesTotal, StreamBitsPerSecond, StripeBitsPerSecond, RTTSeconds,
		LossRatio, RetransmitsTotal, AuthRefused, IntegrityFailures, Stalls, VerifyFailures, Resent, ChannelMovesTotal, ClassChannels, CPUSecondsTotal,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}

// Label turns an index into a label value.
func Label(i int32) string { return strconv.Itoa(int(i)) }

// CPUSeconds is the process's user + system CPU time so far.
func CPUSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return tv(ru.Utime) + tv(ru.Stime)
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

// TCPInfo is what we read of a connection's TCP_INFO.
type TCPInfo struct {
	RTT          time.Duration
	TotalRetrans uint32
	SegsOut      uint32
	// MinRTT is the smallest RTT the connection has seen (no queueing in it).
	MinRTT time.Duration
	// BytesAcked is what the peer's TCP has acknowledged: delivered, unlike what was
	// written into the socket buffer.
	BytesAcked uint64
	// SackedBytes is what the peer selectively acknowledged beyond the cumulative
	// acknowledgement (segments held out of order while a loss is repaired), counted
	// in full segments of the sender's MSS.
	SackedBytes uint64
	// BusyTime is how long the connection has had data to send, and WindowLimited how
	// much of that a window held it back — the receiver's (tcpi_rwnd_limited) or its
	// own send buffer (tcpi_sndbuf_limited) — rather than the congestion window or
	// the path. Both grow for the connection's life (Linux 4.10 on; zero before).
	BusyTime, WindowLimited time.Duration
	// OK says TCP_INFO was read.
	OK bool
}

// DeliveredBytes is what reached the peer: the cumulative acknowledgement plus what it
// selectively acknowledged past a hole. bytes_acked alone stalls while a loss is
// repaired and then jumps by everything received meanwhile (up to a window), so a
// rate read from it over a second moves by several per cent with where the repairs
// fall; the delivered count moves with the data, as the kernel's own delivery-rate
// samples (tcpi_delivered) do.
func (t TCPInfo) DeliveredBytes() int64 { return int64(t.BytesAcked + t.SackedBytes) }

// ReadTCPInfo reads TCP_INFO of c (zero if c is not a TCP connection). A wrapper
// with a NetConn method (an authenticated connection) is read through.
func ReadTCPInfo(c net.Conn) TCPInfo {
	if w, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = w.NetConn()
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return TCPInfo{}
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return TCPInfo{}
	}
	var out TCPInfo
	rc.Control(func(fd uintptr) {
		ti, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		if err == nil {
			out = TCPInfo{RTT: time.Duration(ti.Rtt) * time.Microsecond, TotalRetrans: ti.Total_retrans, SegsOut: ti.Segs_out,
				MinRTT: time.Duration(ti.Min_rtt) * time.Microsecond, BytesAcked: ti.Bytes_acked,
				SackedBytes: uint64(ti.Sacked) * uint64(ti.Snd_mss), BusyTime: time.Duration(ti.Busy_time) * time.Microsecond,
				WindowLimited: time.Duration(ti.Rwnd_limited+ti.Sndbuf_limited) * time.Microsecond, OK: true}
		}
	})
	return out
}

// Handler serves /metrics, /status (the JSON that status returns) and /healthz.
func Handler(status func() any) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(status())
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	// Every goroutine's stack, as SIGQUIT would print it but without ending the
	// process: an agent that hangs is looked into where it hangs (in a pod, SIGQUIT's
	// dump goes with the container when the controller replaces it).
	mux.HandleFunc("/debug/goroutines", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		pprof.Lookup("goroutine").WriteTo(w, 2)
	})
	return mux
}

// idleTimeout closes a keep-alive connection that sends no request for this long.
var idleTimeout = 30 * time.Second

// DefaultAddr is where an agent serves /metrics and /status unless told otherwise:
// loopback only, because /status names the job's paths and errors.
const DefaultAddr = "127.0.0.1:9750"

// Serve serves Handler(status) on addr until ctx ends and returns the address it
// listens on. Slow or idle clients are cut off (header, read, write and idle
// timeouts), so that held-open connections cannot pile up.
func Serve(ctx context.Context, addr string, status func() any, log *slog.Logger) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: Handler(status), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 10 * time.Second, IdleTimeout: idleTimeout}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("Metrics server stopped", "err", err.Error())
		}
	}()
	log.Info("Serving metrics and status", "metricsAddr", ln.Addr().String())
	return ln.Addr(), nil
}
