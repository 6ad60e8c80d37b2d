package mover

import "testing"

// TestBlockBuffersAreDisjoint: the session's block buffers, made in one allocation,
// are each a block long, and none reaches into another — a write through one buffer
// (its full capacity, as append would use it) never changes another's bytes.
func TestBlockBuffersAreDisjoint(t *testing.T) {
	for _, c := range []struct{ streams, concurrency int32 }{{1, 1}, {4, 4}, {7, 3}} {
		const block = 4096 + 7 // not a power of two: the bounds are the block's, not a page's
		s := &ssession{bufs: make(chan *[]byte, maxBlockBuffers)}
		s.cfg.BlockSize, s.cfg.Streams, s.cfg.Concurrency = block, c.streams, c.concurrency
		s.growBuffers()
		s.cfg.Streams++ // a reconfiguration adds buffers to those already made
		s.growBuffers()
		want := 2*int(c.streams+1) + 2*int(c.concurrency) + 2
		if len(s.bufs) != want || s.nbufs != want {
			t.Fatalf("%d streams, %d files in flight: %d buffers (%d counted), want %d", c.streams+1, c.concurrency, len(s.bufs), s.nbufs, want)
		}
		var bufs [][]byte
		for range want {
			b := *<-s.bufs
			if len(b) != block || cap(b) != block {
				t.Fatalf("a buffer of length %d and capacity %d, want %d", len(b), cap(b), block)
			}
			bufs = append(bufs, b)
		}
		for i, b := range bufs {
			full := b[:cap(b)]
			for j := range full {
				full[j] = byte(i + 1)
			}
		}
		for i, b := range bufs {
			for j, v := range b {
				if v != byte(i+1) {
					t.Fatalf("buffer %d's byte %d is %d: another buffer's write reached it", i, j, v)
				}
			}
		}
	}
}
