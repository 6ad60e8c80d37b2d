package wanem

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Direction is what one direction of the emulated link does to the packets that cross
// it, in this order: a bottleneck of RateBitsPerSecond with a drop-tail queue of
// QueueBytes in front of it, then random and bursty loss on the wire, then bit
// corruption of some of the packets that were not lost, then a one-way propagation
// Delay. Packets are never reordered.
type Direction struct {
	// Delay is the one-way propagation delay added to every packet.
	Delay time.Duration
	// RateBitsPerSecond is the bottleneck's line rate; 0 means unlimited (no queue).
	RateBitsPerSecond int64
	// QueueBytes is the bottleneck's drop-tail queue (bytes waiting for the line,
	// the packet being serialized included). 0 picks the default: one bandwidth-delay
	// product of the link's configured RTT, at least DefaultMinQueueBytes.
	QueueBytes int64
	// Loss is the probability that a packet on the wire is lost, independently of
	// every other packet.
	Loss float64
	// GilbertElliott, when set, adds bursty loss on top of Loss.
	GilbertElliott *GilbertElliott
	// Corrupt is the probability that a packet on the wire that was not lost arrives
	// with one bit flipped, as netem's corrupt does: by default the bit is anywhere in
	// the IP packet after its checksums were computed, so the receiving stack's IP or
	// TCP checksum catches it and drops the packet (for TCP, a loss that costs a
	// retransmission). See CorruptUndetected.
	Corrupt float64
	// CorruptUndetected puts the flipped bit in the TCP payload and makes the
	// packet's TCP checksum agree with it, so the receiving stack delivers the wrong
	// byte to the application: what a router or NIC that corrupts data after checking
	// it (or a checksum collision) does, and what only an end-to-end check catches.
	// Packets without TCP payload (pure ACKs, other protocols) then pass intact.
	CorruptUndetected bool
	// OverheadBytes is added to every packet's IP length when it is serialized on the
	// bottleneck, e.g. 38 for Ethernet framing (header, FCS, preamble, gap); 0 makes
	// the rate a rate of IP packets.
	OverheadBytes int
}

// DefaultMinQueueBytes is the smallest default bottleneck queue: with a zero-delay
// link one BDP is no queue at all, and TCP needs a few packets of room.
const DefaultMinQueueBytes = 1 << 20

// Config is the whole link: A→B and B→A, and the seed of the loss models, so that a run
// can be repeated packet for packet (given the same packets).
type Config struct {
	AtoB Direction
	BtoA Direction
	Seed uint64
}

// Symmetric is a Config with the same direction both ways: delay is the one-way delay
// (half the RTT).
func Symmetric(d Direction) Config { return Config{AtoB: d, BtoA: d} }

// RTT is the configured round-trip propagation delay.
func (c Config) RTT() time.Duration { return c.AtoB.Delay + c.BtoA.Delay }

// Validate reports the first field that makes no sense, by its JSON name.
func (c Config) Validate() error {
	if err := c.AtoB.validate("aToB"); err != nil {
		return err
	}
	return c.BtoA.validate("bToA")
}

func (d Direction) validate(name string) error {
	switch {
	case d.Delay < 0 || d.Delay > time.Minute:
		return fmt.Errorf("%s.delay: %v is outside [0, 1m]", name, d.Delay)
	case d.RateBitsPerSecond < 0:
		return fmt.Errorf("%s.rateBitsPerSecond: %d is negative", name, d.RateBitsPerSecond)
	case d.QueueBytes < 0:
		return fmt.Errorf("%s.queueBytes: %d is negative", name, d.QueueBytes)
	case !(d.Loss >= 0 && d.Loss <= 1):
		return fmt.Errorf("%s.loss: %v is not a probability in [0,1]", name, d.Loss)
	case !(d.Corrupt >= 0 && d.Corrupt <= 1):
		return fmt.Errorf("%s.corrupt: %v is not a probability in [0,1]", name, d.Corrupt)
	case d.OverheadBytes < 0 || d.OverheadBytes > 1000:
		return fmt.Errorf("%s.overheadBytes: %d is outside [0,1000]", name, d.OverheadBytes)
	}
	if d.GilbertElliott != nil {
		if err := d.GilbertElliott.validate(); err != nil {
			return fmt.Errorf("%s.%w", name, err)
		}
	}
	return nil
}

// MeanLoss is the long-run loss probability of the direction's loss models together.
func (d Direction) MeanLoss() float64 {
	keep := 1 - d.Loss
	if d.GilbertElliott != nil {
		keep *= 1 - d.GilbertElliott.MeanLoss()
	}
	return 1 - keep
}

// effectiveQueue is QueueBytes, or the default for a link whose round trip is rtt.
func (d Direction) effectiveQueue(rtt time.Duration) int64 {
	if d.QueueBytes > 0 {
		return d.QueueBytes
	}
	bdp := int64(float64(d.RateBitsPerSecond) / 8 * rtt.Seconds())
	return max(bdp, DefaultMinQueueBytes)
}

// directionJSON is the wire form of Direction for the control API and the command:
// durations as Go duration strings ("25ms"), rates in bits per second.
type directionJSON struct {
	Delay             string          `json:"delay,omitempty"`
	RateBitsPerSecond *int64          `json:"rateBitsPerSecond,omitempty"`
	QueueBytes        *int64          `json:"queueBytes,omitempty"`
	Loss              *float64        `json:"loss,omitempty"`
	GilbertElliott    *GilbertElliott `json:"gilbertElliott,omitempty"`
	// NoGilbertElliott switches bursty loss off in a partial update.
	NoGilbertElliott  bool     `json:"noGilbertElliott,omitempty"`
	Corrupt           *float64 `json:"corrupt,omitempty"`
	CorruptUndetected *bool    `json:"corruptUndetected,omitempty"`
	OverheadBytes     *int     `json:"overheadBytes,omitempty"`
}

// MarshalJSON writes every field.
func (d Direction) MarshalJSON() ([]byte, error) {
	return json.Marshal(directionJSON{
		Delay:             d.Delay.String(),
		RateBitsPerSecond: &d.RateBitsPerSecond,
		QueueBytes:        &d.QueueBytes,
		Loss:              &d.Loss,
		GilbertElliott:    d.GilbertElliott,
		Corrupt:           &d.Corrupt,
		CorruptUndetected: &d.CorruptUndetected,
		OverheadBytes:     &d.OverheadBytes,
	})
}

// UnmarshalJSON overwrites only the fields present, so that a partial document is a
// partial update ({"rateBitsPerSecond": 500000000} changes the rate and nothing else).
func (d *Direction) UnmarshalJSON(b []byte) error {
	var w directionJSON
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return err
	}
	if w.Delay != "" {
		v, err := time.ParseDuration(w.Delay)
		if err != nil {
			return fmt.Errorf("delay: %w", err)
		}
		d.Delay = v
	}
	if w.RateBitsPerSecond != nil {
		d.RateBitsPerSecond = *w.RateBitsPerSecond
	}
	if w.QueueBytes != nil {
		d.QueueBytes = *w.QueueBytes
	}
	if w.Loss != nil {
		d.Loss = *w.Loss
	}
	if w.GilbertElliott != nil {
		g := *w.GilbertElliott
		d.GilbertElliott = &g
	}
	if w.NoGilbertElliott {
		d.GilbertElliott = nil
	}
	if w.Corrupt != nil {
		d.Corrupt = *w.Corrupt
	}
	if w.CorruptUndetected != nil {
		d.CorruptUndetected = *w.CorruptUndetected
	}
	if w.OverheadBytes != nil {
		d.OverheadBytes = *w.OverheadBytes
	}
	return nil
}

type configJSON struct {
	AtoB *Direction `json:"aToB,omitempty"`
	BtoA *Direction `json:"bToA,omitempty"`
	// Both applies the same partial update to both directions (before aToB/bToA).
	Both json.RawMessage `json:"both,omitempty"`
	Seed *uint64         `json:"seed,omitempty"`
}

// MarshalJSON writes both directions and the seed.
func (c Config) MarshalJSON() ([]byte, error) {
	return json.Marshal(configJSON{AtoB: &c.AtoB, BtoA: &c.BtoA, Seed: &c.Seed})
}

// UnmarshalJSON applies a partial update: {"both": {"delay": "25ms"}} or
// {"aToB": {"rateBitsPerSecond": 500000000}}.
func (c *Config) UnmarshalJSON(b []byte) error {
	var w struct {
		AtoB json.RawMessage `json:"aToB"`
		BtoA json.RawMessage `json:"bToA"`
		Both json.RawMessage `json:"both"`
		Seed *uint64         `json:"seed"`
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return err
	}
	if len(w.Both) > 0 {
		if err := json.Unmarshal(w.Both, &c.AtoB); err != nil {
			return fmt.Errorf("both: %w", err)
		}
		if err := json.Unmarshal(w.Both, &c.BtoA); err != nil {
			return fmt.Errorf("both: %w", err)
		}
	}
	if len(w.AtoB) > 0 {
		if err := json.Unmarshal(w.AtoB, &c.AtoB); err != nil {
			return fmt.Errorf("aToB: %w", err)
		}
	}
	if len(w.BtoA) > 0 {
		if err := json.Unmarshal(w.BtoA, &c.BtoA); err != nil {
			return fmt.Errorf("bToA: %w", err)
		}
	}
	if w.Seed != nil {
		c.Seed = *w.Seed
	}
	return nil
}

// ParseRate reads a rate in bits per second: "1G", "1Gbit", "250M", "1.5g", "800000",
// "10Gbps" (decimal prefixes; "0" or "" is unlimited).
func ParseRate(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "" {
		return 0, nil
	}
	for _, unit := range []string{"bit/s", "bps", "bit", "b/s"} {
		if strings.HasSuffix(t, unit) {
			t = strings.TrimSuffix(t, unit)
			break
		}
	}
	mult := 1.0
	switch {
	case strings.HasSuffix(t, "k"):
		mult, t = 1e3, strings.TrimSuffix(t, "k")
	case strings.HasSuffix(t, "m"):
		mult, t = 1e6, strings.TrimSuffix(t, "m")
	case strings.HasSuffix(t, "g"):
		mult, t = 1e9, strings.TrimSuffix(t, "g")
	case strings.HasSuffix(t, "t"):
		mult, t = 1e12, strings.TrimSuffix(t, "t")
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("rate %q: want a number of bits per second like 1G, 250M or 800000", s)
	}
	return int64(math.Round(v * mult)), nil
}

// ParseBytes reads a size in bytes: "4MiB", "1m" (binary), "65536", "2GB" (decimal).
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, nil
	}
	units := []struct {
		suffix string
		mult   float64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
		{"k", 1 << 10}, {"K", 1 << 10}, {"m", 1 << 20}, {"M", 1 << 20}, {"g", 1 << 30}, {"G", 1 << 30},
		{"B", 1},
	}
	mult := 1.0
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			mult, t = u.mult, strings.TrimSuffix(t, u.suffix)
			break
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("size %q: want bytes like 65536, 4MiB or 2GB", s)
	}
	return int64(math.Round(v * mult)), nil
}

// FormatRate writes bits per second with a decimal prefix ("1Gbit/s").
func FormatRate(bps float64) string {
	switch {
	case bps == 0:
		return "0"
	case bps >= 1e9:
		return strconv.FormatFloat(bps/1e9, 'f', -1, 64) + "Gbit/s"
	case bps >= 1e6:
		return strconv.FormatFloat(bps/1e6, 'f', -1, 64) + "Mbit/s"
	case bps >= 1e3:
		return strconv.FormatFloat(bps/1e3, 'f', -1, 64) + "kbit/s"
	}
	return strconv.FormatFloat(bps, 'f', -1, 64) + "bit/s"
}
