package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/dtnflow/dtnflow/agent/auth"
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
