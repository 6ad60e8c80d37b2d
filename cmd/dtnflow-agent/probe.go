package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/dtnflow/dtnflow/agent/coord"
	"github.com/dtnflow/dtnflow/agent/mover"
)

// runProbe is `dtnflow-agent probe`: memory-to-memory samples against a receiver, one
// for each stream count, printed as JSON lines.
func runProbe(ctx context.Context, args []string, log *slog.Logger) error {
	fs := newFlags("probe", "probe --to HOST:PORT --secret-file FILE [--streams 1,2,4,8] [--seconds 3]")
	to := fs.String("to", "", "receiver address")
	secretFile := fs.String("secret-file", "", "file holding the job's shared secret")
	streams := fs.String("streams", "1,2,4,8", "stream counts to sample")
	seconds := fs.Int("seconds", 3, "seconds per sample")
	var buffer, block byteSize
	block = mover.DefaultBlockSize
	fs.Var(&buffer, "buffer", "socket buffer per stream (0: autotuning)")
	fs.Var(&block, "block-size", "block size on the wire")
	if err := parse(fs, args); err != nil {
		return err
	}
	secret, err := loadSecret(*secretFile)
	if err != nil {
		return err
	}
	list, err := parseInts(*streams)
	if err != nil {
		return fmt.Errorf("--streams: %w", err)
	}
	if *to == "" {
		return errors.New("--to is required")
	}
	enc := json.NewEncoder(os.Stdout)
	for _, n := range list {
		res, err := mover.Probe(ctx, *to, secret, mover.ProbeOptions{Streams: n, BufferBytes: int64(buffer), Duration: time.Duration(*seconds) * time.Second, BlockSize: int64(block)})
		if err != nil {
			return err
		}
		enc.Encode(res.Sample)
		fmt.Fprintf(os.Stderr, "streams %3d  %14s  source %5d m  destination %5d m\n", n, coord.HumanRate(res.Sample.BitsPerSecond), res.Sample.SourceMillicores, res.Sample.DestinationMillicores)
	}
	return nil
}
