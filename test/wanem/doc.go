// Package wanem emulates a wide-area link between two network namespaces in user
// space, because this kernel has no netem: one-way delay per direction, random and
// bursty (Gilbert-Elliott) loss, bit corruption (caught by the receiving stack's
// checksum as with netem's corrupt, or past it), a rate-limited bottleneck with a
// drop-tail queue in bytes, MTU up to 9000 (and beyond), and counters of what it
// delayed, dropped and corrupted.
// It is a Go library (Join, Link.Update, Link.Stats; tests start it in-process), a
// command (test/wanem/cmd/wanem: flags, control socket, counters on SIGUSR1 and at
// exit) and the bottleneck of test/topology.
//
// # How it works
//
// Each end is a TUN device in its namespace, opened with IFF_VNET_HDR and TUNSETOFFLOAD
// (checksum, TSO4, TSO6, TSO-ECN), so that the kernel hands over TCP super-packets of up
// to 64 KiB — as a NIC with TSO would take them — and accepts them back on the far side,
// where the receiving stack treats them like a GRO aggregate. Per direction, one reader
// thread stamps each packet with CLOCK_MONOTONIC and asks the shaper (a pure model:
// shaper.go) the fate and arrival time of every wire segment the super-packet stands
// for; one writer thread hands packets to the far TUN when due. Both threads block in
// the kernel (poll, ppoll on an eventfd), not in the Go scheduler, and ask for
// 1-nanosecond timer slack; the writer asks to wake a learned ~50 µs early (the VM's
// timer wake-ups are 50–100 µs late) and writes a packet due within that lead at once
// rather than spin for it (a spin per packet took up to a core of a 2-core machine
// from the hosts it connects), so a packet is written within tens of microseconds of
// its due time, early or late (Stats: lateness, earliness).
//
// The shaper is a fluid model of a serializing line: a segment of L bytes (plus
// OverheadBytes) arriving at t starts when the line is free and takes L·8/rate; the
// queue at t is what the line still has to send, (lineFree−t)·rate, and a segment that
// would push it past QueueBytes is dropped (drop-tail). A segment that made it onto
// the line is then lost with the random and Gilbert-Elliott probabilities (it used the
// bottleneck, as a corrupted frame does), and otherwise arrives at finish+delay, never
// before the segment admitted before it: nothing is reordered, even when the delay is
// lowered at run time. Since arrivals are computed, not slept through, a writer that
// is late for one packet does not shift the schedule of the next, and the line never
// loses capacity to the emulator's own jitter.
//
// Being faithful with super-packets: loss and queue drops are decided per wire segment
// (the packet the sender's NIC would have put on the wire), not per super-packet — a
// super-packet-level coin would turn random loss into bursts of up to 45 segments and
// change what TCP sees. When some segments of a super-packet are dropped, the survivors
// are cut out in user space (TCP sequence numbers, IPv4 IDs, FIN/PSH/CWR and full
// checksums as the kernel's GSO would) and sent as packets of their own. A super-packet
// is delivered whole at its last segment's arrival (as GRO would hand it to the
// receiver) unless its segments span more than Options.Granularity (1 ms) of line time
// — at rates under about 500 Mbit/s — in which case every segment goes at its own time.
//
// # Why this design (measured here, 2 cores shared with other work)
//
// Through the emulator with no rate limit, iperf3 (one cubic stream, 5 s; `make
// bench-wanem`, TestAccuracyUnlimited):
//
//	offloads, MTU 9000      6.7 Gbit/s   1.0 s of emulator CPU per GB
//	offloads, MTU 1500      6.6 Gbit/s   1.0 s/GB (the stack builds the same 64 KiB super-packets)
//	no offloads, MTU 9000   3.6 Gbit/s   2.4 s/GB
//	no offloads, MTU 1500   0.94 Gbit/s 10.9 s/GB (one read and one write per 1500-byte packet)
//
// At the 1 Gbit/s target, offloads cost half the CPU of packet-at-a-time (4.3–4.9
// against 8.6–13 s of process CPU per GB; per thread, for 1 GB through 1 Gbit/s: readers
// 0.5 s each, the data writer 1.0 s and the ACK writer 0.6 s — the writes include the
// receiving stacks' softirq work — and about 1.7 s in the Go runtime handing
// processors between the blocking threads), reach up to 98 % of the rate, and
// leave the ~2 000 packets a second of 64 KiB that one reader and one writer per
// direction serve with room to spare, so multi-queue TUNs and batched reads were not
// needed. They are the default (Options.NoOffload keeps the other path for
// comparison: it is steadier under load but tops out at 94–95 % of 1 Gbit/s).
// The rate limit stays in user space, in the same model as delay and loss, rather than
// in tbf on a veth: one queue, one set of counters, changeable atomically at run time,
// and the queue limit means exactly bytes waiting for the bottleneck.
//
// Threads first blocked in the Go runtime (netpoll for reads, channels and
// clock_nanosleep for the delay line): idle ping through a 50 ms RTT link averaged
// 50.64 ms, with a 5 ms tail from scheduler hand-offs. Moving both to raw poll/ppoll on
// locked threads gave 50.42 ms, and the learned early wake-up 50.21–50.28 ms. Options.
// Realtime puts the four threads under SCHED_FIFO (best effort; the kernel's RT
// throttling bounds them): on an idle machine it changes nothing, under other
// engineers' load it cuts write lateness from milliseconds to about 0.1 ms.
//
// Accuracy (make bench-wanem; figures and commands in docs/benchmarks.md, section "WAN
// emulator"): iperf3 through 1 Gbit/s, zero delay, no loss reaches 98 % (cubic) and 97 %
// (BBR) of the rate at best, 96 % and 93 % in the median, on a machine other engineers
// were loading; with a 50 ms RTT configured, ping measures 50.4–50.7 ms on average
// (median 50.3–50.4 ms, never below 50.1 ms); configured loss 1e-2, 1e-3 and
// Gilbert-Elliott 1e-2 are seen by an iperf3 UDP receiver at +0.9 %, +7.7 % and +5.7 %
// — exactly the emulator's own drops, the binomial spread of one seed's draws (across
// seeds the mean is unbiased, TestRandomLossUnbiasedAcrossSeeds).
//
// Corruption (Direction.Corrupt) flips one bit of a packet that was not lost. A TCP
// super-packet with a corrupted segment is cut into segments, so that the flip lands in
// one wire segment after its checksum was computed; a single packet whose checksum the
// kernel left partial has it completed first. Either way the receiving stack checks
// the checksum and drops the packet, as it does behind netem's corrupt (TCP
// retransmits: corruption costs what loss costs). With CorruptUndetected the bit is in
// the TCP payload and the checksum is recomputed over it: the application receives
// the wrong byte, which only an end-to-end check catches (TestCorruptionCaughtOrDelivered
// shows both on a real TCP connection).
//
// What is left out on purpose: jitter and reordering (not asked for; FIFO arrivals make
// both impossible), UDP segmentation offload (UDP arrives as plain packets), IPv6
// extension headers in super-packets (the local stack sends none).
package wanem
