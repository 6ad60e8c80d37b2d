package wanem

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// LinkFlags are the command-line flags that describe an emulated link; the wanem
// and topology commands share them.
type LinkFlags struct {
	rate, queue, ge, configFile string
	delay, rtt                  time.Duration
	loss, corrupt               float64
	corruptUndetected           bool
	overhead                    int
	seed                        uint64
	mtu                         int
	noOffload, realtime         bool
	granularity                 time.Duration
}

// AddLinkFlags registers the link flags on fs.
func AddLinkFlags(fs *flag.FlagSet) *LinkFlags {
	f := &LinkFlags{}
	fs.StringVar(&f.rate, "rate", "", "bottleneck rate each way in bits/s (1G, 250M, ...; empty: unlimited)")
	fs.DurationVar(&f.delay, "delay", 0, "one-way delay each way (see -rtt)")
	fs.DurationVar(&f.rtt, "rtt", 0, "round-trip delay, split evenly between the directions (instead of -delay)")
	fs.Float64Var(&f.loss, "loss", 0, "random loss probability per packet, each way")
	fs.Float64Var(&f.corrupt, "corrupt", 0, "probability per packet, each way, that one bit is flipped (the receiving stack's checksum catches it, as with netem's corrupt)")
	fs.BoolVar(&f.corruptUndetected, "corrupt-undetected", false, "flip the bits of -corrupt in TCP payload and fix the checksum, so that the application gets the wrong bytes")
	fs.StringVar(&f.ge, "ge", "", "Gilbert-Elliott bursty loss each way: p,r,lossGood,lossBad (e.g. 0.001,0.3,0,0.5)")
	fs.StringVar(&f.queue, "queue", "", "bottleneck drop-tail queue in bytes (4MiB, ...; empty: one BDP, at least 1 MiB)")
	fs.IntVar(&f.overhead, "overhead", 0, "bytes added to every packet on the bottleneck (38: Ethernet framing)")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the loss models")
	fs.StringVar(&f.configFile, "config", "", "JSON file with a (partial) link config applied after the flags, e.g. {\"bToA\":{\"rateBitsPerSecond\":1e8}}")
	fs.IntVar(&f.mtu, "mtu", 9000, "MTU of the link")
	fs.BoolVar(&f.noOffload, "no-offload", false, "read one packet per MTU instead of 64 KiB TCP super-packets (slower)")
	fs.BoolVar(&f.realtime, "realtime", false, "run the emulator threads under SCHED_FIFO (steadier delays on a busy machine)")
	fs.DurationVar(&f.granularity, "granularity", DefaultGranularity, "longest serialization of a super-packet delivered whole")
	return f
}

// Config builds the link configuration and options the flags describe.
func (f *LinkFlags) Config() (Config, Options, error) {
	rate, err := ParseRate(f.rate)
	if err != nil {
		return Config{}, Options{}, fmt.Errorf("-rate: %w", err)
	}
	queue, err := ParseBytes(f.queue)
	if err != nil {
		return Config{}, Options{}, fmt.Errorf("-queue: %w", err)
	}
	if f.delay != 0 && f.rtt != 0 {
		return Config{}, Options{}, fmt.Errorf("-delay and -rtt: give one of them")
	}
	delay := f.delay
	if f.rtt != 0 {
		delay = f.rtt / 2
	}
	d := Direction{Delay: delay, RateBitsPerSecond: rate, QueueBytes: queue, Loss: f.loss, Corrupt: f.corrupt, CorruptUndetected: f.corruptUndetected, OverheadBytes: f.overhead}
	if f.ge != "" {
		g, err := ParseGilbertElliott(f.ge)
		if err != nil {
			return Config{}, Options{}, fmt.Errorf("-ge: %w", err)
		}
		d.GilbertElliott = &g
	}
	cfg := Symmetric(d)
	cfg.Seed = f.seed
	if f.configFile != "" {
		b, err := os.ReadFile(f.configFile)
		if err != nil {
			return Config{}, Options{}, fmt.Errorf("-config: %w", err)
		}
		if err := json.Unmarshal(b, &cfg); err != nil {
			return Config{}, Options{}, fmt.Errorf("-config %s: %w", f.configFile, err)
		}
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, Options{}, err
	}
	opts := Options{MTU: f.mtu, NoOffload: f.noOffload, Realtime: f.realtime, Granularity: f.granularity}
	return cfg, opts, nil
}

// ParseGilbertElliott reads "p,r,lossGood,lossBad".
func ParseGilbertElliott(s string) (GilbertElliott, error) {
	parts := strings.Split(s, ",")
	if len(parts) != 4 {
		return GilbertElliott{}, fmt.Errorf("%q: want p,r,lossGood,lossBad", s)
	}
	var v [4]float64
	for i, p := range parts {
		x, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil {
			return GilbertElliott{}, fmt.Errorf("%q: %w", s, err)
		}
		v[i] = x
	}
	g := GilbertElliott{P: v[0], R: v[1], LossGood: v[2], LossBad: v[3]}
	return g, g.validate()
}
