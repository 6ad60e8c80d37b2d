package wanem

import (
	"testing"
	"time"

	"github.com/dtnflow/dtnflow/agent/metrics"
)

// The agent's probe samples read what reached the receiver from TCP_INFO
// (metrics.TCPInfo.DeliveredBytes). Through a lossy emulated line, the count must follow
// the data while losses are repaired — the selectively acknowledged bytes count at
// once, not when the hole is filled — and never run ahead of what the line carried.
// Before the selectively acknowledged bytes were counted, the on-data samples of a 500
// Mbit/s path read up to 526 Mbit/s: a sample that began inside a repair counted, at
// its end, a window's worth of bytes that had arrived before it began.
func TestDeliveredBytesFollowTheLineThroughLoss(t *testing.T) {
	const size = 16 << 20
	lossy := Direction{RateBitsPerSecond: 100e6, Delay: 10 * time.Millisecond, Loss: 0.01}
	p := newPair(t, Config{AtoB: lossy, BtoA: Direction{RateBitsPerSecond: 100e6, Delay: 10 * time.Millisecond}}, Options{})
	c, received := p.dialThrough(t, 9997, discard)
	written := make(chan error, 1)
	go func() {
		_, err := c.Write(make([]byte, size))
		written <- err
	}()

	var reads, withSacked int
	var worstAckedLag, worstDeliveredLag int64
	deadline := time.After(60 * time.Second)
	for done := false; !done; {
		select {
		case err := <-written:
			if err != nil {
				t.Fatal(err)
			}
			done = true
		case <-deadline:
			t.Fatal("16 MiB did not leave in 60 s")
		case <-time.After(2 * time.Millisecond):
		}
		ti := metrics.ReadTCPInfo(c)
		// read after TCP_INFO: the line's count at admission is ahead of any
		// acknowledgement of what it carried
		line := int64(p.link.Stats().AtoB.DeliveredBytes)
		if !ti.OK {
			t.Fatal("TCP_INFO not read")
		}
		reads++
		if ti.SackedBytes > 0 {
			withSacked++
		}
		delivered := ti.DeliveredBytes()
		if delivered < int64(ti.BytesAcked) {
			t.Fatalf("delivered %d < bytes_acked %d", delivered, ti.BytesAcked)
		}
		// Selectively acknowledged bytes count in whole segments: the last one may be
		// short by less than a segment (the MTU, 9000), which the headers the line also
		// counted (52 bytes a segment) do not always cover at the start.
		if slack := int64(9000); delivered > line+slack {
			t.Fatalf("read %d bytes delivered with the line having carried %d (headers included): ahead of the wire", delivered, line)
		}
		worstAckedLag = max(worstAckedLag, line-int64(ti.BytesAcked))
		worstDeliveredLag = max(worstDeliveredLag, line-delivered)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-received:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the receiver did not finish")
	}
	st := p.link.Stats().AtoB
	if st.LostSegments == 0 {
		t.Fatalf("1 %% loss dropped nothing: %+v", st)
	}
	// a repair lasts at least a round trip (20 ms); reads every 2 ms see it
	if withSacked == 0 {
		t.Fatalf("%d segments lost, and none of %d reads saw selectively acknowledged bytes", st.LostSegments, reads)
	}
	t.Logf("%d reads, %d during a repair; %d segments lost; the most the line was ahead: %d bytes of bytes_acked, %d of the delivered count",
		reads, withSacked, st.LostSegments, worstAckedLag, worstDeliveredLag)
}
