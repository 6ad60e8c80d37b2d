package wanem

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	for in, want := range map[string]int64{
		"": 0, "0": 0, "1G": 1e9, "1g": 1e9, "1Gbit": 1e9, "1gbps": 1e9, "10Gbit/s": 10e9,
		"250M": 250e6, "1.5g": 1.5e9, "800000": 800000, "64k": 64000, " 100mbit ": 100e6,
	} {
		got, err := ParseRate(in)
		if err != nil || got != want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"fast", "-1G", "1X", "NaN"} {
		if _, err := ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q): no error", in)
		}
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{
		"": 0, "65536": 65536, "4MiB": 4 << 20, "4m": 4 << 20, "1G": 1 << 30, "2GB": 2e9, "9000B": 9000, "64KiB": 65536,
	} {
		got, err := ParseBytes(in)
		if err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := ParseBytes("lots"); err == nil {
		t.Error("ParseBytes(lots): no error")
	}
}

func TestConfigJSONPartialUpdates(t *testing.T) {
	cfg := Symmetric(Direction{Delay: 25 * time.Millisecond, RateBitsPerSecond: 1e9, Loss: 1e-4,
		GilbertElliott: &GilbertElliott{P: 0.001, R: 0.3, LossBad: 0.5}})
	for name, c := range map[string]struct {
		patch string
		check func(Config) bool
	}{
		"halve a→b rate": {`{"aToB":{"rateBitsPerSecond":500000000}}`, func(c Config) bool {
			return c.AtoB.RateBitsPerSecond == 5e8 && c.BtoA.RateBitsPerSecond == 1e9 && c.AtoB.Delay == 25*time.Millisecond
		}},
		"both delays": {`{"both":{"delay":"5ms"}}`, func(c Config) bool {
			return c.AtoB.Delay == 5*time.Millisecond && c.BtoA.Delay == 5*time.Millisecond && c.AtoB.Loss == 1e-4
		}},
		"both then one": {`{"both":{"loss":0.01},"bToA":{"loss":0}}`, func(c Config) bool {
			return c.AtoB.Loss == 0.01 && c.BtoA.Loss == 0
		}},
		"gilbert off": {`{"aToB":{"noGilbertElliott":true}}`, func(c Config) bool {
			return c.AtoB.GilbertElliott == nil && c.BtoA.GilbertElliott != nil
		}},
		"seed": {`{"seed":42}`, func(c Config) bool { return c.Seed == 42 && c.AtoB.RateBitsPerSecond == 1e9 }},
	} {
		t.Run(name, func(t *testing.T) {
			got := cfg
			g := *cfg.AtoB.GilbertElliott
			got.AtoB.GilbertElliott, got.BtoA.GilbertElliott = &g, &g
			if err := json.Unmarshal([]byte(c.patch), &got); err != nil {
				t.Fatal(err)
			}
			if !c.check(got) {
				b, _ := json.Marshal(got)
				t.Errorf("after %s: %s", c.patch, b)
			}
		})
	}
}

func TestConfigJSONRoundTrip(t *testing.T) {
	cfg := Config{
		AtoB: Direction{Delay: 25 * time.Millisecond, RateBitsPerSecond: 1e9, QueueBytes: 4 << 20, Loss: 1e-3, OverheadBytes: 38},
		BtoA: Direction{Delay: 30 * time.Millisecond, GilbertElliott: &GilbertElliott{P: 0.01, R: 0.5, LossGood: 0.001, LossBad: 0.4}},
		Seed: 9,
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var back Config
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	b2, _ := json.Marshal(back)
	if string(b) != string(b2) {
		t.Errorf("round trip changed the config:\n%s\n%s", b, b2)
	}
}

func TestConfigValidateNamesTheField(t *testing.T) {
	for want, cfg := range map[string]Config{
		"aToB.loss":                   {AtoB: Direction{Loss: 1.5}},
		"bToA.delay":                  {BtoA: Direction{Delay: -time.Second}},
		"aToB.rateBitsPerSecond":      {AtoB: Direction{RateBitsPerSecond: -1}},
		"bToA.queueBytes":             {BtoA: Direction{QueueBytes: -5}},
		"aToB.gilbertElliott.r":       {AtoB: Direction{GilbertElliott: &GilbertElliott{P: 0.1}}},
		"bToA.gilbertElliott.lossBad": {BtoA: Direction{GilbertElliott: &GilbertElliott{P: 0.1, R: 0.1, LossBad: 2}}},
	} {
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v, want an error naming %s", err, want)
		}
	}
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("zero config: %v", err)
	}
	var cfg Config
	if err := json.Unmarshal([]byte(`{"aToB":{"rate":5}}`), &cfg); err == nil {
		t.Error("unknown field accepted")
	}
}

func TestParseGilbertElliott(t *testing.T) {
	g, err := ParseGilbertElliott("0.001, 0.3, 0, 0.5")
	if err != nil || g != (GilbertElliott{P: 0.001, R: 0.3, LossBad: 0.5}) {
		t.Errorf("got %+v, %v", g, err)
	}
	for _, in := range []string{"0.1,0.2", "a,b,c,d", "0.1,0,0,1"} {
		if _, err := ParseGilbertElliott(in); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}
