package parallel

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// TestEachVisitsEveryIndexOnce: every index once, whatever the count, the stretch and
// the cores; a list shorter than two stretches runs in order on the caller's
// goroutine, as the cost of a goroutine is not worth it.
func TestEachVisitsEveryIndexOnce(t *testing.T) {
	for _, procs := range []int{1, 2, 3, 8} {
		prev := runtime.GOMAXPROCS(procs)
		for _, perWorker := range []int{0, 1, 7, 256} {
			for _, n := range []int{0, 1, 6, 7, 13, 14, 255, 256, 257, 511, 512, 513, 1000, 4097} {
				visits := make([]atomic.Int32, n)
				var mu sync.Mutex
				var order []int
				Each(n, perWorker, func(i int) {
					visits[i].Add(1)
					mu.Lock()
					order = append(order, i)
					mu.Unlock()
				})
				for i := range visits {
					if v := visits[i].Load(); v != 1 {
						t.Fatalf("GOMAXPROCS %d, %d per worker, n=%d: index %d visited %d times", procs, perWorker, n, i, v)
					}
				}
				if (procs == 1 || n < 2*max(perWorker, 1)) && !slices.IsSorted(order) {
					t.Fatalf("GOMAXPROCS %d, %d per worker, n=%d: a loop of one stretch ran out of order: %v", procs, perWorker, n, order)
				}
			}
		}
		runtime.GOMAXPROCS(prev)
	}
}
