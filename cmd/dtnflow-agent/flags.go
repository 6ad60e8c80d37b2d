package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/dtnflow/dtnflow/agent/contract"
	"log/slog"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/dtnflow/dtnflow/agent/auth"
	"github.com/dtnflow/dtnflow/agent/coord"
	"github.com/dtnflow/dtnflow/agent/metrics"
	"github.com/dtnflow/dtnflow/agent/mover"
	"github.com/dtnflow/dtnflow/optimizer"
)

var errUsage = errors.New("usage")

func newFlags(name, synopsis string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "Usage: dtnflow-agent %s\n\nFlags:\n%s", synopsis, fs.FlagUsages())
	}
	return fs
}

func parse(fs *pflag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return errUsage
		}
		return err
	}
	return nil
}

// byteSize is a flag that takes 4194304, 4M, 4MiB, 1G, ...
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }
func (b *byteSize) Type() string   { return "bytes" }
func (b *byteSize) Set(s string) error {
	v, err := parseBytes(s)
	*b = byteSize(v)
	return err
}

func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	up := strings.ToUpper(s)
	for _, u := range []struct {
		suf string
		m   int64
	}{{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"TIB", 1 << 40}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}} {
		if strings.HasSuffix(up, u.suf) {
			mult, s = u.m, s[:len(s)-len(u.suf)]
			break
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("not a size: %q", s)
	}
	return int64(v * float64(mult)), nil
}

// rateFlag takes 10G, 500M (bits per second).
type rateFlag int64

func (r *rateFlag) String() string { return strconv.FormatInt(int64(*r), 10) }
func (r *rateFlag) Type() string   { return "bits/s" }
func (r *rateFlag) Set(s string) error {
	up := strings.ToUpper(strings.TrimSuffix(strings.TrimSuffix(s, "bit/s"), "bps"))
	mult := 1.0
	switch {
	case strings.HasSuffix(up, "G"):
		mult, up = 1e9, up[:len(up)-1]
	case strings.HasSuffix(up, "M"):
		mult, up = 1e6, up[:len(up)-1]
	case strings.HasSuffix(up, "K"):
		mult, up = 1e3, up[:len(up)-1]
	}
	v, err := strconv.ParseFloat(up, 64)
	if err != nil {
		return fmt.Errorf("not a rate: %q", s)
	}
	*r = rateFlag(v * mult)
	return nil
}

func loadSecret(path string) ([]byte, error) {
	if path == "" {
		return nil, errors.New("--secret-file is required: every peer of a job must prove the same secret")
	}
	return auth.LoadSecret(path)
}

func listen(addr string) (net.Listener, error) {
	if addr == "" {
		return nil, errors.New("--listen is required")
	}
	return net.Listen("tcp", addr)
}

// jobID derives a standalone job's id from what it moves, so that running the same
// command again finds the same journal.
func jobID(dest string, paths []string) string {
	p := append([]string(nil), paths...)
	sort.Strings(p)
	h := sha256.Sum256([]byte(dest + "\x00" + strings.Join(p, "\x00")))
	return "job-" + hex.EncodeToString(h[:8])
}

func parseInts(s string) ([]int32, error) {
	var out []int32
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("not a positive integer: %q", f)
		}
		out = append(out, int32(v))
	}
	return out, nil
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

// serveMetrics serves /metrics and /status on addr ("" or "off": not at all). Failing
// to bind is not fatal: several agents on one host (pods on a host network) cannot all
// have the default port, and the data path does not need it.
func serveMetrics(ctx context.Context, addr string, status func() any, log *slog.Logger) {
	if addr == "" || addr == "off" {
		return
	}
	if _, err := metrics.Serve(ctx, addr, status, log); err != nil {
		log.Info("Not serving metrics and status", "metricsAddr", addr, "err", err.Error())
	}
}

const metricsAddrUsage = "serve /metrics, /status (which names paths and errors) and /debug/goroutines (every goroutine's stack) on this address; keep it on loopback or a management network (\"off\": not at all)"

func openRoot(dir string) (*os.Root, error) {
	if dir == "" {
		return nil, errors.New("--root is required")
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("--root: %w", err)
	}
	return r, nil
}

type jobFlags struct {
	streams, concurrency, pipelining int32
	buffer, blockSize, chunkSize     byteSize
	maxRate                          rateFlag
	checksum, overwrite, destPath    string
	inFlight, verifyMode             string
	sourceErrors                     string
	verify                           bool
	job                              string
	reportInterval                   time.Duration
	classMoves                       bool
}

func (j *jobFlags) register(fs interface {
	Int32Var(*int32, string, int32, string)
	StringVar(*string, string, string, string)
	BoolVar(*bool, string, bool, string)
	DurationVar(*time.Duration, string, time.Duration, string)
}, add func(v interface {
	String() string
	Set(string) error
	Type() string
}, name, usage string)) {
	fs.Int32Var(&j.streams, "streams", 4, "parallel TCP streams per stripe")
	fs.Int32Var(&j.concurrency, "concurrency", 0, fmt.Sprintf("files in flight per stripe; with --auto, the most a size class may use (0: %d, or %d with --auto)", optimizer.DefaultConcurrency, optimizer.DefaultMaxConcurrency))
	fs.Int32Var(&j.pipelining, "pipelining", 16, "requests kept in flight per concurrent file (small files cost no round trip)")
	j.blockSize, j.chunkSize = mover.DefaultBlockSize, mover.DefaultChunkSize
	add(&j.buffer, "buffer", "socket buffer per stream (0: kernel autotuning), e.g. 16M")
	add(&j.blockSize, "block-size", "block size on the wire; files up to this size travel in one frame")
	add(&j.chunkSize, "chunk-size", "large files are handed out and verified in chunks of this size")
	add(&j.maxRate, "max-rate", "cap on the job's aggregate rate in bits/s, e.g. 5G (0: none)")
	fs.StringVar(&j.checksum, "checksum", "BLAKE3", "end-to-end digest: BLAKE3, SHA256, SHA512 or MD5")
	fs.BoolVar(&j.verify, "verify", true, "compare every file's digest at the destination with the source's before renaming it")
	fs.StringVar(&j.verifyMode, "verify-mode", "ReadBack", "where the destination's digest comes from: ReadBack (the file read back once written: proves the file system returns the source's bytes; a second pass) or OnArrival (each block as it arrives, before it is written: proves the receiver wrote the source's bytes; one pass)")
	fs.StringVar(&j.overwrite, "overwrite", "IfDifferent", "existing destination files: Never, IfDifferent or Always")
	fs.StringVar(&j.sourceErrors, "source-errors", contract.SourceErrorsFail, "a source file that cannot be read, vanishes or changes while it is read: Fail (the job fails naming it) or Skip (it is skipped and listed; the job ends PartiallyComplete, exit code 3)")
	fs.StringVar(&j.inFlight, "in-flight", "Authenticated", "how data is checked on the way: Authenticated (every frame's data under its AES-GMAC tag), Checksum (headers, names and a CRC32C of the data under the tag: cheaper, not proof against content crafted to keep its CRC32C) or HeadersOnly (headers and names under the tag, data unchecked in flight and moved by sendfile/splice without a pass through user space; --verify then checks it end to end)")
	fs.StringVar(&j.destPath, "dest-path", "", "directory under the destination root to write under (default: the root)")
	fs.StringVar(&j.job, "job", "", "job id, names the receivers' journal (default: derived from the paths)")
	fs.DurationVar(&j.reportInterval, "report-interval", 2*time.Second, "how often progress is reported")
	fs.BoolVar(&j.classMoves, "class-moves", true, "let the size classes' scheduler (MC, ProMC) move channels between classes while the job runs; false keeps the plan's channels (to measure what the moves bring)")
}

func (j *jobFlags) params() coord.Params {
	return coord.Params{Streams: j.streams, BufferBytes: int64(j.buffer), Concurrency: j.concurrency, Pipelining: j.pipelining, MaxBitsPerSecond: int64(j.maxRate)}
}
