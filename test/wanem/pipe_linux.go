package wanem

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// bigBufLen holds the largest super-packet a TUN hands over (64 KiB of IP packet)
	// and its virtio header.
	bigBufLen = vnetHdrLen + 65536 + 256
	// smallBufLen: packets up to this size (ACKs, pings) are copied out of the read
	// buffer so that a big buffer is not held for the whole delay by 60 bytes.
	smallBufLen = 2048
)

// packet is a buffer on the delay line: buf[:n] is what is written to the far TUN at
// arrival (nanoseconds of CLOCK_MONOTONIC).
type packet struct {
	buf     *[]byte
	n       int
	arrival int64
	wire    int // IP bytes it carries, for the in-flight gauge
}

// pipe is one direction of a link: a reader that stamps packets from the sending TUN
// and asks the shaper their fate, a delay line, and a writer that hands them to the
// receiving TUN when due. Reader and writer each own an OS thread and block in the
// kernel (poll, ppoll) rather than in the Go scheduler, so that a packet is picked up
// and handed on within tens of microseconds of when it should be.
type pipe struct {
	in, out     int // TUN descriptors (non-blocking)
	stop        int // eventfd: readable once the link closes
	vnet        bool
	granularity int64
	realtime    bool

	mu  sync.Mutex // guards sh and rng (the reader, and configuration changes)
	sh  *shaper
	rng *rand.Rand

	line delayLine
	ctr  counters

	big, small bufPool
	wg         sync.WaitGroup
}

func newPipe(in, out, stop int, opts Options, d Direction, rtt time.Duration, seed uint64) (*pipe, error) {
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, err
	}
	p := &pipe{
		in: in, out: out, stop: stop,
		vnet: !opts.NoOffload, granularity: int64(opts.Granularity), realtime: opts.Realtime,
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
	p.sh = newShaper(d, rtt, p.rng)
	p.line.wake = wake
	p.big = newBufPool(bigBufLen, 1024)
	p.small = newBufPool(smallBufLen, 8192)
	return p, nil
}

func (p *pipe) configure(d Direction, rtt time.Duration) {
	p.mu.Lock()
	p.sh.configure(d, rtt, p.rng)
	p.mu.Unlock()
}

func (p *pipe) start() {
	p.wg.Add(2)
	go p.readLoop()
	go p.writeLoop()
}

// wait returns when both loops have seen the stop event; it then releases the
// pipe's own descriptor (the TUNs belong to the link).
func (p *pipe) wait() {
	p.wg.Wait()
	unix.Close(p.line.wake)
}

func (p *pipe) put(b *[]byte) {
	if len(*b) == bigBufLen {
		p.big.put(b)
	} else {
		p.small.put(b)
	}
}

// bufPool is a free list of buffers of one size. Unlike a sync.Pool it survives
// garbage collections: at 1 Gbit/s a sync.Pool emptied by every GC cycle made the
// emulator allocate (and collect) about 100 MB/s of 64 KiB buffers.
type bufPool struct {
	size int
	free chan *[]byte
}

func newBufPool(size, keep int) bufPool {
	return bufPool{size: size, free: make(chan *[]byte, keep)}
}

func (b bufPool) get() *[]byte {
	select {
	case buf := <-b.free:
		return buf
	default:
		buf := make([]byte, b.size)
		return &buf
	}
}

func (b bufPool) put(buf *[]byte) {
	select {
	case b.free <- buf:
	default: // more buffers than the pool keeps: let the collector have this one
	}
}

// ownThread locks the goroutine to its thread and makes the thread's timers precise
// (and, when asked, its scheduling real-time).
func (p *pipe) ownThread() {
	runtime.LockOSThread()
	preciseTimers()
	if p.realtime {
		realtimeThread()
	}
}

func (p *pipe) readLoop() {
	defer p.wg.Done()
	p.ownThread()
	defer runtime.UnlockOSThread()
	var (
		fates    = make([]fate, 0, 64)
		arrivals = make([]int64, 0, 64)
		hdr      = 0
		fds      = []unix.PollFd{{Fd: int32(p.in), Events: unix.POLLIN}, {Fd: int32(p.stop), Events: unix.POLLIN}}
	)
	if p.vnet {
		hdr = vnetHdrLen
	}
	buf := p.big.get()
	for {
		n, err := unix.Read(p.in, *buf)
		if err != nil {
			switch err {
			case unix.EAGAIN:
				fds[0].Revents, fds[1].Revents = 0, 0
				if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
					p.ctr.readErrors.Add(1)
				}
				if fds[1].Revents != 0 {
					return
				}
			case unix.EINTR:
			default:
				p.ctr.readErrors.Add(1)
				if stopped(p.stop) {
					return
				}
			}
			continue
		}
		now := monoNow()
		if n <= hdr {
			p.ctr.malformed.Add(1)
			continue
		}
		pkt := (*buf)[:n]
		sp, err := parseSuperPacket(pkt, p.vnet)
		if err != nil {
			p.ctr.malformed.Add(1)
			sp = superPacket{segs: 1, ipLen: n - hdr}
			if p.vnet {
				sp.hdr = decodeVnetHdr(pkt)
			}
		}
		if cap(fates) < sp.segs {
			fates = make([]fate, sp.segs)
			arrivals = make([]int64, sp.segs)
		}
		fates, arrivals = fates[:sp.segs], arrivals[:sp.segs]

		p.mu.Lock()
		delivered := p.sh.admit(now, sp.segs, sp.segmentWireLen, fates, arrivals)
		hw := p.sh.maxBacklog
		p.mu.Unlock()

		p.ctr.packets.Add(1)
		p.ctr.segments.Add(uint64(sp.segs))
		if hw > p.ctr.queueHighWater.Load() {
			p.ctr.queueHighWater.Store(hw)
		}
		first, last, wire, corrupt := -1, -1, 0, 0
		for i, f := range fates {
			l := sp.segmentWireLen(i)
			p.ctr.bytes.Add(uint64(l))
			switch f {
			case fateDeliver, fateCorrupt:
				if f == fateCorrupt {
					corrupt++
				}
				if first < 0 {
					first = i
				}
				last = i
				wire += l
			case fateDropQueue:
				p.ctr.queueDroppedSegments.Add(1)
				p.ctr.queueDroppedBytes.Add(uint64(l))
			case fateDropLoss:
				p.ctr.lostSegments.Add(1)
				p.ctr.lostBytes.Add(uint64(l))
			}
		}
		if delivered == 0 {
			continue // buf is reused for the next read
		}
		p.ctr.deliveredSegments.Add(uint64(delivered))
		p.ctr.deliveredBytes.Add(uint64(wire))

		// A corrupted segment is cut out of its super-packet, so that the flip lands in
		// it alone and after its checksum is computed (as on a wire).
		split := sp.segs > 1 && (delivered < sp.segs || corrupt > 0 || arrivals[last]-arrivals[first] > p.granularity)
		if !split && corrupt > 0 {
			p.corrupt(pkt)
		}
		switch {
		case split:
			// Each surviving segment becomes a packet of its own, due at its own time.
			p.ctr.splitPackets.Add(1)
			ip := pkt[vnetHdrLen:]
			for i, f := range fates {
				if f != fateDeliver && f != fateCorrupt {
					continue
				}
				seg := p.big.get()
				m, err := sp.writeSegment(*seg, ip, i)
				if err != nil {
					p.ctr.malformed.Add(1)
					p.big.put(seg)
					continue
				}
				if f == fateCorrupt {
					p.corrupt((*seg)[:m])
				}
				p.line.push(packet{buf: seg, n: m, arrival: arrivals[i], wire: sp.segmentWireLen(i)}, &p.ctr)
			}
		case n <= smallBufLen:
			s := p.small.get()
			copy(*s, pkt)
			p.line.push(packet{buf: s, n: n, arrival: arrivals[last], wire: wire}, &p.ctr)
		default:
			p.line.push(packet{buf: buf, n: n, arrival: arrivals[last], wire: wire}, &p.ctr)
			buf = p.big.get()
		}
	}
}

// corrupt flips one bit of a packet as read from the TUN (the virtio header first,
// when the pipe uses them), completing a partial checksum first so that the flip comes
// after it, and counts what it corrupted.
func (p *pipe) corrupt(pkt []byte) {
	ip := pkt
	if p.vnet {
		if completeChecksum(pkt) != nil {
			p.ctr.malformed.Add(1)
			return
		}
		ip = pkt[vnetHdrLen:]
	}
	p.mu.Lock()
	flipped := corruptPacket(ip, p.sh.dir.CorruptUndetected, p.sh.pick)
	p.mu.Unlock()
	if flipped {
		p.ctr.corruptedSegments.Add(1)
		p.ctr.corruptedBytes.Add(uint64(len(ip)))
	}
}

func (p *pipe) writeLoop() {
	defer p.wg.Done()
	p.ownThread()
	defer runtime.UnlockOSThread()
	var batch []packet
	for {
		var ok bool
		batch, ok = p.line.due(batch[:0], p.stop)
		if !ok {
			for _, pk := range p.line.drain() {
				p.put(pk.buf)
			}
			return
		}
		for _, pk := range batch {
			late := monoNow() - pk.arrival
			for {
				_, err := unix.Write(p.out, (*pk.buf)[:pk.n])
				if err == unix.EINTR {
					continue
				}
				if err != nil {
					p.ctr.writeErrors.Add(1)
				}
				break
			}
			p.ctr.observeLateness(late)
			p.ctr.inFlightPackets.Add(-1)
			p.ctr.inFlightBytes.Add(-int64(pk.wire))
			p.put(pk.buf)
		}
	}
}

// stopped reports whether the stop eventfd has fired.
func stopped(stop int) bool {
	fds := []unix.PollFd{{Fd: int32(stop), Events: unix.POLLIN}}
	n, _ := unix.Poll(fds, 0)
	return n > 0
}

// delayLine is a FIFO of packets in arrival order (the shaper hands out arrivals that
// never decrease, so the head is always the next one due).
type delayLine struct {
	mu      sync.Mutex
	q       []packet
	head    int
	waiting bool // the writer sleeps until woken: the line was empty
	wake    int  // eventfd the reader writes to wake the writer
	lead    int64
}

var one = []byte{1, 0, 0, 0, 0, 0, 0, 0}

func (l *delayLine) push(pk packet, c *counters) {
	c.inFlightPackets.Add(1)
	c.inFlightBytes.Add(int64(pk.wire))
	l.mu.Lock()
	l.q = append(l.q, pk)
	w := l.waiting
	l.waiting = false
	l.mu.Unlock()
	if w {
		_, _ = unix.Write(l.wake, one)
	}
}

// Timer lead: the kernel wakes a sleeping thread some tens of microseconds after it
// asked (about 50–100 µs on these VMs), so the writer asks to be woken that much
// early, learned as a moving average of how late its wake-ups were (at most maxLead).
// A head due sooner than the lead is written at once, up to the lead early, instead of
// being spun for: a sleep would wake it later than that, and a spin per packet cost
// the emulator up to a core of the 2-core machines it shares with the hosts it
// connects. Under SCHED_FIFO that spin starved them, and it cost the most to flows of
// more, smaller super-packets: eight BBR flows pacing at 125 Mbit/s each (two segments
// per super-packet) took the emulator 50 CPU seconds for 4 GiB at 1 Gbit/s and moved
// 935–947 Mbit/s, where GridFTP's eight flows (three segments per super-packet) took
// 39–42 s and moved 977–982; without the spin 36 and 32–34 s, and 976–979 against
// 975–986 Mbit/s (docs/benchmarks.md, "The emulator's spin", 2026-12-02). The error a
// packet is written with stays within the lead either way (Stats: lateness and
// earliness).
const maxLead = int64(200 * time.Microsecond)

// writeNow says whether a packet due at next is written at now: once due, or when a
// sleep (which wakes about lead late) could not wake before it is.
func writeNow(next, now, lead int64) bool { return next-now <= lead }

// due waits until the head of the line is due (or due within the lead) and returns, appended to batch, every
// packet due by then. It returns false once stop is readable.
func (l *delayLine) due(batch []packet, stop int) ([]packet, bool) {
	fds := []unix.PollFd{{Fd: int32(stop), Events: unix.POLLIN}, {Fd: int32(l.wake), Events: unix.POLLIN}}
	var scratch [8]byte
	for {
		l.mu.Lock()
		var timeout *unix.Timespec
		var wakeAt int64
		if l.head == len(l.q) {
			l.waiting = true
		} else if next, now := l.q[l.head].arrival, monoNow(); !writeNow(next, now, l.lead) {
			// Packets pushed meanwhile are due later, so nothing can jump the head.
			l.mu.Unlock()
			wakeAt = next - l.lead
			ts := unix.NsecToTimespec(wakeAt - now)
			timeout = &ts
			l.mu.Lock()
		} else {
			// The head is due, or due within the lead: written now, with whatever else is
			// due by then.
			by := max(now, next)
			for l.head < len(l.q) && l.q[l.head].arrival <= by {
				batch = append(batch, l.q[l.head])
				l.q[l.head] = packet{}
				l.head++
			}
			if l.head == len(l.q) {
				l.q, l.head = l.q[:0], 0
			} else if l.head > 4096 && l.head*2 > len(l.q) {
				n := copy(l.q, l.q[l.head:])
				l.q, l.head = l.q[:n], 0
			}
			l.mu.Unlock()
			return batch, true
		}
		l.mu.Unlock()
		fds[0].Revents, fds[1].Revents = 0, 0
		n, err := unix.Ppoll(fds, timeout, nil)
		if err != nil && err != unix.EINTR {
			return batch, false
		}
		if fds[0].Revents != 0 {
			return batch, false
		}
		if fds[1].Revents != 0 {
			_, _ = unix.Read(l.wake, scratch[:])
		}
		if n == 0 && timeout != nil {
			late := monoNow() - wakeAt
			l.lead = min(max(l.lead+(late-l.lead)/16, 0), maxLead)
		}
	}
}

// drain empties the line (when the link closes).
func (l *delayLine) drain() []packet {
	l.mu.Lock()
	defer l.mu.Unlock()
	rest := append([]packet(nil), l.q[l.head:]...)
	l.q, l.head = nil, 0
	return rest
}
