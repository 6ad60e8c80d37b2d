// Package parallel spreads a loop over the machine's cores where the loop is long
// enough to pay for the goroutines: the walk's lstats of a large directory and the
// receiver's lstats of a manifest are one system call per file, and on a 2-core DTN
// node the other core would otherwise wait.
package parallel

import (
	"runtime"
	"sync"
)

// Each calls fn(0) … fn(n−1) once each, over one goroutine per core, each goroutine
// taking a contiguous stretch of at least perWorker indexes (fewer goroutines when n is
// short; none when one stretch covers it). fn must be safe to call concurrently for
// different indexes. Each returns once every call has.
func Each(n, perWorker int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n/max(perWorker, 1))
	if workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w * n / workers; i < (w+1)*n/workers; i++ {
				fn(i)
			}
		})
	}
	wg.Wait()
}
