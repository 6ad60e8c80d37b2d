package wanem

import (
	"golang.org/x/sys/unix"
)

// monoNow is CLOCK_MONOTONIC in nanoseconds: the one clock of the emulator, shared by
// the readers that stamp packets and the writers that sleep until they are due.
func monoNow() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// preciseTimers makes the calling thread's sleeps end when asked rather than up to
// the default 50 µs later (the timer slack), so that delays are accurate.
func preciseTimers() {
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
}

// realtimeThread moves the calling thread to SCHED_FIFO, so that it runs as soon as a
// packet is due even when other processes keep both cores busy. It is best effort.
// The threads sleep between packets; the kernel's RT throttling
// (sched_rt_runtime_us) keeps a saturated emulator from starving the machine.
func realtimeThread() {
	_ = unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 10}, 0)
}
