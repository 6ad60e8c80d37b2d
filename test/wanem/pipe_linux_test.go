package wanem

import (
	"testing"
	"time"
)

// A head due within the writer's timer lead is written at once (a sleep would wake
// after it is due); one due later is slept for, whatever the lead.
func TestWriteNowWithinTheLead(t *testing.T) {
	us := int64(time.Microsecond)
	for _, c := range []struct {
		name            string
		next, now, lead int64
		want            bool
	}{
		{"overdue", 1000 * us, 1200 * us, 60 * us, true},
		{"due now", 1000 * us, 1000 * us, 0, true},
		{"due within the lead", 1000 * us, 950 * us, 60 * us, true},
		{"due exactly a lead away", 1000 * us, 940 * us, 60 * us, true},
		{"due just past the lead", 1000 * us, 939 * us, 60 * us, false},
		{"no lead learned yet", 1000 * us, 999 * us, 0, false},
		{"far off, the largest lead", 1000 * us, 1000*us - maxLead - 1, maxLead, false},
	} {
		if got := writeNow(c.next, c.now, c.lead); got != c.want {
			t.Errorf("%s: writeNow(next %d µs, now %d µs, lead %d µs) = %v, want %v", c.name, c.next/us, c.now/us, c.lead/us, got, c.want)
		}
	}
}

// A packet written before its due time counts as on time in the lateness figures and
// raises the earliness maximum; late ones land in their buckets.
func TestLatenessAndEarlinessCounted(t *testing.T) {
	var c counters
	c.observeLateness(-int64(40 * time.Microsecond))
	c.observeLateness(-int64(15 * time.Microsecond))
	c.observeLateness(int64(3 * time.Millisecond))
	c.observeLateness(int64(30 * time.Microsecond))
	s := c.snapshot()
	if s.EarlinessMax != 40*time.Microsecond {
		t.Errorf("earliness max %v, want 40µs", s.EarlinessMax)
	}
	if s.LatenessMax != 3*time.Millisecond {
		t.Errorf("lateness max %v, want 3ms", s.LatenessMax)
	}
	if want := (3*time.Millisecond + 30*time.Microsecond) / 4; s.LatenessMean != want {
		t.Errorf("lateness mean %v, want %v (early packets count as 0)", s.LatenessMean, want)
	}
	// buckets: <10µs, <20µs, <50µs, <100µs, <200µs, <500µs, <1ms, <2ms, <5ms, the rest
	want := []uint64{2, 0, 1, 0, 0, 0, 0, 0, 1, 0}
	for i := range want {
		if s.LatenessHistogram[i] != want[i] {
			t.Fatalf("histogram %v, want %v", s.LatenessHistogram, want)
		}
	}
}
