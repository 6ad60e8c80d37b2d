// Package metrics holds everything dtnflow-agent measures: the Prometheus metrics
// (registered once, on a registry of their own), TCP_INFO of a connection, and the
// process's own CPU time. Label sets are bounded: stripe and stream indices only.
package metrics

import (
	"encoding/json"
	"net"
	"net/http"
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
	// StreamBitsPerSecond is each stream's rate over the last second.
	StreamBitsPerSecond = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dtnflow_agent_stream_bits_per_second", Help: "Rate of each TCP stream over the last second.",
	}, []string{"stripe", "stream"})
	// StripeBitsPerSecond is each stripe's rate over the last second.
	StripeBitsPerSecond = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dtnflow_agent_stripe_bits_per_second", Help: "Rate of each stripe over the last second.",
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
		Name: "dtnflow_agent_connections_refused_total", Help: "Connections refused, by reason (auth, protocol).",
	}, []string{"reason"})
	// CorruptBlocks counts blocks or files whose in-flight CRC32C did not match.
	CorruptBlocks = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dtnflow_agent_corrupt_blocks_total", Help: "Blocks or small files whose in-flight CRC32C failed; each was sent again.",
	})
	// VerifyFailures counts chunks or files whose end-to-end digest did not match.
	VerifyFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dtnflow_agent_verify_failures_total", Help: "Chunks or files whose end-to-end digest did not match; each was sent again.",
	})
	// Resent counts blocks and files sent again.
	Resent = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dtnflow_agent_resent_total", Help: "Blocks and files the sender sent again after a failed check.",
	})
	// CPUSecondsTotal is the agent's own CPU time (user + system).
	CPUSecondsTotal = prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "dtnflow_agent_cpu_seconds_total", Help: "CPU seconds used by this agent (user + system).",
	}, CPUSeconds)
)

func init() {
	Registry.MustRegister(BytesTotal, FilesTotal, StreamBitsPerSecond, StripeBitsPerSecond, RTTSeconds,
		LossRatio, RetransmitsTotal, AuthRefused, CorruptBlocks, VerifyFailures, Resent, CPUSecondsTotal,
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
	// OK says TCP_INFO was read.
	OK bool
}

// ReadTCPInfo reads TCP_INFO of c (zero if c is not a TCP connection).
func ReadTCPInfo(c net.Conn) TCPInfo {
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
				MinRTT: time.Duration(ti.Min_rtt) * time.Microsecond, BytesAcked: ti.Bytes_acked, OK: true}
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
	return mux
}
