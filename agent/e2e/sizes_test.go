package e2e

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestSizesAtEveryBoundary sends files whose sizes sit on, just below and just above
// every boundary the data path cuts at — empty, one byte, the block size (files up to
// it travel in one frame), the chunk size, several chunks, a last chunk of one block
// and of one byte — plus sizes drawn near those boundaries from a seed, in each
// in-flight mode and both verify modes, and checks that every file arrives with the
// source's bytes, mode and mtime and nothing else does.
func TestSizesAtEveryBoundary(t *testing.T) {
	const block, chunk = 128 << 10, 512 << 10 // smallUnits
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	var files []fileSpec
	add := func(size int) {
		if size >= 0 {
			files = append(files, fileSpec{path: fmt.Sprintf("b/s%08d-%d", size, len(files)), size: size})
		}
	}
	for _, base := range []int{0, 1, 8, block, 2 * block, chunk, chunk + block, 2 * chunk, 3*chunk + block, 4 * chunk} {
		for _, d := range []int{-1, 0, 1} {
			add(base + d)
		}
	}
	for range 12 {
		// A whole number of chunks and blocks, then a few bytes either way.
		add(rng.IntN(5)*chunk + rng.IntN(chunk/block+1)*block + rng.IntN(17) - 8)
	}
	s := newSite(t, seed, files)
	for i, mode := range [][]string{
		{"--in-flight", "Authenticated", "--verify-mode", "ReadBack"},
		{"--in-flight", "Checksum", "--verify-mode", "OnArrival"},
		{"--in-flight", "HeadersOnly", "--verify-mode", "ReadBack"}, // spliced into the files
		{"--in-flight", "HeadersOnly", "--verify=false"},            // sendfile and splice, nothing read in user space
		{"--in-flight", "Authenticated", "--verify=false"},          // each stream reads its blocks itself
		{"--in-flight", "Encrypted", "--verify-mode", "OnArrival"},
	} {
		t.Run(strings.Join(mode, " "), func(t *testing.T) {
			s.sendAll(t, "b", len(files), append([]string{"--streams", "3", "--job", fmt.Sprintf("sizes%d", i)}, mode...)...)
		})
	}
}
