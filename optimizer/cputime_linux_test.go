//go:build linux

package optimizer

import (
	"runtime"
	"syscall"
	"testing"
)

// threadCPU is the CPU time the calling OS thread has used, in nanoseconds.
func threadCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(0x1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// reportCPU runs the benchmark body locked to one OS thread and reports the CPU time
// it used per operation ("cpu-ns/op") next to the wall time: on a shared machine the
// wall time includes waiting for a core, the CPU time does not.
func reportCPU(b *testing.B, body func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := threadCPU()
	n := 0
	for b.Loop() {
		body()
		n++
	}
	if n > 0 {
		b.ReportMetric(float64(threadCPU()-start)/float64(n), "cpu-ns/op")
	}
}
