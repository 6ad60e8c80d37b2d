package wanem

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
)

// tcpSuperPacket builds a virtio header and an IPv4 or IPv6 TCP packet carrying
// payload, as the kernel hands over a GSO super-packet of segments of mss bytes.
func tcpSuperPacket(v6 bool, payload []byte, mss int, flags byte) []byte {
	tcpLen := 32 // with options (timestamps)
	ipLen := 20
	if v6 {
		ipLen = 40
	}
	pkt := make([]byte, vnetHdrLen+ipLen+tcpLen+len(payload))
	gso := uint8(vnetGSOTCPv4)
	if v6 {
		gso = vnetGSOTCPv6
	}
	vnetHdr{flags: vnetFlagNeedsCsum, gsoType: gso, hdrLen: uint16(ipLen + tcpLen), gsoSize: uint16(mss),
		csumStart: uint16(ipLen), csumOffset: 16}.encode(pkt)
	ip := pkt[vnetHdrLen:]
	if v6 {
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(tcpLen+len(payload)))
		ip[6] = 6
		ip[7] = 64
		copy(ip[8:24], []byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1})
		copy(ip[24:40], []byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2})
	} else {
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
		binary.BigEndian.PutUint16(ip[4:], 0x1234)
		ip[6] = 0x40 // DF
		ip[8] = 64
		ip[9] = 6
		copy(ip[12:16], []byte{10, 251, 0, 1})
		copy(ip[16:20], []byte{10, 251, 0, 2})
	}
	tcp := ip[ipLen:]
	binary.BigEndian.PutUint16(tcp[0:], 40000)
	binary.BigEndian.PutUint16(tcp[2:], 5201)
	binary.BigEndian.PutUint32(tcp[4:], 0xfffff000) // wraps within the packet
	binary.BigEndian.PutUint32(tcp[8:], 77)
	tcp[12] = byte(tcpLen/4) << 4
	tcp[13] = flags
	binary.BigEndian.PutUint16(tcp[14:], 512)
	tcp[20], tcp[21] = 1, 1 // NOP NOP, then a timestamp option
	tcp[22], tcp[23] = 8, 10
	copy(ip[ipLen+tcpLen:], payload)
	return pkt
}

// checksumOK verifies a complete IPv4/IPv6 TCP packet's checksums the slow, obvious way.
func checksumOK(t *testing.T, ip []byte) {
	t.Helper()
	if problem := checksumProblem(ip); problem != "" {
		t.Error(problem)
	}
}

// checksumProblem says what is wrong with the packet's lengths and checksums, or "".
func checksumProblem(ip []byte) string {
	var sum func(b []byte) uint32
	sum = func(b []byte) uint32 {
		var s uint32
		for i := 0; i+1 < len(b); i += 2 {
			s += uint32(b[i])<<8 | uint32(b[i+1])
		}
		if len(b)%2 == 1 {
			s += uint32(b[len(b)-1]) << 8
		}
		return s
	}
	fold := func(s uint32) uint16 {
		for s > 0xffff {
			s = s&0xffff + s>>16
		}
		return uint16(s)
	}
	var l4 int
	var pseudo uint32
	if ip[0]>>4 == 4 {
		l4 = int(ip[0]&0xf) * 4
		if fold(sum(ip[:l4])) != 0xffff {
			return "bad IPv4 header checksum"
		}
		if int(binary.BigEndian.Uint16(ip[2:])) != len(ip) {
			return fmt.Sprintf("IPv4 total length %d, packet %d", binary.BigEndian.Uint16(ip[2:]), len(ip))
		}
		pseudo = sum(ip[12:20]) + 6 + uint32(len(ip)-l4)
	} else {
		l4 = 40
		if int(binary.BigEndian.Uint16(ip[4:])) != len(ip)-40 {
			return fmt.Sprintf("IPv6 payload length %d, packet %d", binary.BigEndian.Uint16(ip[4:]), len(ip))
		}
		pseudo = sum(ip[8:40]) + 6 + uint32(len(ip)-l4)
	}
	if fold(pseudo+sum(ip[l4:])) != 0xffff {
		return "bad TCP checksum"
	}
	return ""
}

func TestSegmentation(t *testing.T) {
	const fin, psh, ack, cwr = 0x01, 0x08, 0x10, 0x80
	for name, c := range map[string]struct {
		v6         bool
		payloadLen int
		mss        int
	}{
		"v4 even":           {false, 8948 * 7, 8948},
		"v4 short last":     {false, 65000, 8948},
		"v4 mtu1500":        {false, 1448*44 + 17, 1448},
		"v6 short last":     {true, 30001, 8928},
		"v4 one byte tail":  {false, 2*1000 + 1, 1000},
		"v4 odd mss":        {false, 10001, 999},
		"v6 single segment": {true, 500, 1000},
	} {
		t.Run(name, func(t *testing.T) {
			payload := make([]byte, c.payloadLen)
			for i := range payload {
				payload[i] = byte(i*7 + i>>8)
			}
			pkt := tcpSuperPacket(c.v6, payload, c.mss, ack|psh|fin|cwr)
			sp, err := parseSuperPacket(pkt, true)
			if err != nil {
				t.Fatal(err)
			}
			want := (c.payloadLen + c.mss - 1) / c.mss
			if sp.segs != want {
				t.Fatalf("segs %d, want %d", sp.segs, want)
			}
			if sp.segs == 1 {
				if _, err := sp.writeSegment(make([]byte, bigBufLen), pkt[vnetHdrLen:], 0); err == nil {
					t.Fatal("writeSegment of a single-segment packet should refuse")
				}
				return
			}
			var got []byte
			wire := 0
			for i := 0; i < sp.segs; i++ {
				dst := make([]byte, bigBufLen)
				n, err := sp.writeSegment(dst, pkt[vnetHdrLen:], i)
				if err != nil {
					t.Fatal(err)
				}
				if h := decodeVnetHdr(dst); h != (vnetHdr{}) {
					t.Errorf("segment %d: virtio header %+v, want empty", i, h)
				}
				ip := dst[vnetHdrLen:n]
				if len(ip) != sp.segmentWireLen(i) {
					t.Errorf("segment %d: %d bytes, segmentWireLen says %d", i, len(ip), sp.segmentWireLen(i))
				}
				wire += len(ip)
				checksumOK(t, ip)
				tcp := ip[sp.l4Off:]
				if seq := binary.BigEndian.Uint32(tcp[4:]); seq != 0xfffff000+uint32(i*c.mss) {
					t.Errorf("segment %d: seq %#x", i, seq)
				}
				fl := tcp[13]
				last, first := i == sp.segs-1, i == 0
				if (fl&fin != 0) != last || (fl&psh != 0) != last || (fl&cwr != 0) != first || fl&ack == 0 {
					t.Errorf("segment %d: flags %#x", i, fl)
				}
				if !c.v6 {
					if id := binary.BigEndian.Uint16(ip[4:]); id != 0x1234+uint16(i) {
						t.Errorf("segment %d: IP id %#x", i, id)
					}
				}
				if !bytes.Equal(tcp[20:32], pkt[vnetHdrLen+sp.l4Off+20:vnetHdrLen+sp.l4Off+32]) {
					t.Errorf("segment %d: TCP options changed", i)
				}
				got = append(got, ip[sp.hdrLen:]...)
			}
			if !bytes.Equal(got, payload) {
				t.Errorf("segments' payload differs from the super-packet's")
			}
			if wire != c.payloadLen+sp.segs*sp.hdrLen {
				t.Errorf("wire bytes %d, want %d", wire, c.payloadLen+sp.segs*sp.hdrLen)
			}
		})
	}
}

func TestParseSuperPacketMalformed(t *testing.T) {
	good := tcpSuperPacket(false, make([]byte, 3000), 1000, 0x10)
	for name, pkt := range map[string][]byte{
		"short virtio header": good[:5],
		"truncated ip":        good[:vnetHdrLen+10],
		"not tcp":             func() []byte { b := bytes.Clone(good); b[vnetHdrLen+9] = 17; return b }(),
		"bad version":         func() []byte { b := bytes.Clone(good); b[vnetHdrLen] = 0x75; return b }(),
		"tcp header too long": func() []byte { b := bytes.Clone(good[:vnetHdrLen+20+24]); b[vnetHdrLen+20+12] = 0xf0; return b }(),
	} {
		if _, err := parseSuperPacket(pkt, true); err == nil {
			t.Errorf("%s: parsed without error", name)
		}
	}
	// Not GSO: one segment, whatever the payload.
	plain := bytes.Clone(good)
	vnetHdr{}.encode(plain)
	sp, err := parseSuperPacket(plain, true)
	if err != nil || sp.segs != 1 || sp.segmentWireLen(0) != len(plain)-vnetHdrLen {
		t.Errorf("plain packet: %+v, %v", sp, err)
	}
}

func FuzzSegmentation(f *testing.F) {
	f.Add(false, uint16(65000), uint16(8948))
	f.Add(true, uint16(1), uint16(1))
	f.Add(false, uint16(3000), uint16(536))
	f.Fuzz(func(t *testing.T, v6 bool, payloadLen, mss uint16) {
		if mss == 0 || payloadLen == 0 || int(payloadLen)/int(mss) > 200 {
			return
		}
		payload := make([]byte, payloadLen)
		for i := range payload {
			payload[i] = byte(i)
		}
		pkt := tcpSuperPacket(v6, payload, int(mss), 0x19)
		sp, err := parseSuperPacket(pkt, true)
		if err != nil {
			t.Fatal(err)
		}
		if sp.segs*int(mss) < int(payloadLen) || (sp.segs-1)*int(mss) >= int(payloadLen) {
			t.Fatalf("%d segments of %d for %d bytes", sp.segs, mss, payloadLen)
		}
		if sp.segs == 1 {
			return
		}
		var got []byte
		for i := 0; i < sp.segs; i++ {
			dst := make([]byte, bigBufLen)
			n, err := sp.writeSegment(dst, pkt[vnetHdrLen:], i)
			if err != nil {
				t.Fatal(err)
			}
			checksumOK(t, dst[vnetHdrLen:n])
			got = append(got, dst[vnetHdrLen+sp.hdrLen:n]...)
		}
		if !bytes.Equal(got, payload) {
			t.Fatal("payload differs")
		}
	})
}

func BenchmarkWriteSegment(b *testing.B) {
	pkt := tcpSuperPacket(false, make([]byte, 8948*7), 8948, 0x10)
	sp, err := parseSuperPacket(pkt, true)
	if err != nil {
		b.Fatal(err)
	}
	dst := make([]byte, bigBufLen)
	b.SetBytes(int64(len(pkt)))
	for b.Loop() {
		for i := 0; i < sp.segs; i++ {
			if _, err := sp.writeSegment(dst, pkt[vnetHdrLen:], i); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// bitsDiffer counts the bits in which a and b differ.
func bitsDiffer(a, b []byte) int {
	n := 0
	for i := range a {
		for x := a[i] ^ b[i]; x != 0; x &= x - 1 {
			n++
		}
	}
	return n
}

func TestCompleteChecksumThenCorrupt(t *testing.T) {
	payload := bytes.Repeat([]byte("dtnflow "), 100)
	for _, v6 := range []bool{false, true} {
		// One segment with a partial checksum, as the kernel hands over a packet it
		// leaves to the NIC: the field holds the pseudo-header's sum.
		pkt := tcpSuperPacket(v6, payload, 9000, 0x18)
		pkt[1] = vnetGSONone
		ip := pkt[vnetHdrLen:]
		sp, err := parseSuperPacket(pkt, true)
		if err != nil || sp.segs != 1 {
			t.Fatalf("v6=%v: %+v %v", v6, sp, err)
		}
		l4 := 20
		if v6 {
			l4 = 40
		}
		// the partial field: the pseudo-header's sum, not complemented
		var pseudo uint32
		if v6 {
			pseudo = sum16(ip[8:40], 0) + 6 + uint32(len(ip)-l4)
		} else {
			pseudo = sum16(ip[12:20], 0) + 6 + uint32(len(ip)-l4)
			binary.BigEndian.PutUint16(ip[10:], ^fold(sum16(ip[:20], 0)))
		}
		binary.BigEndian.PutUint16(ip[l4+16:], fold(pseudo))
		if err := completeChecksum(pkt); err != nil {
			t.Fatal(err)
		}
		if decodeVnetHdr(pkt).flags&vnetFlagNeedsCsum != 0 {
			t.Errorf("v6=%v: NEEDS_CSUM still set", v6)
		}
		checksumOK(t, ip)

		// Undetected: one payload bit differs and the checksum agrees.
		clean := append([]byte(nil), ip...)
		undetected := append([]byte(nil), ip...)
		for range 50 {
			copy(undetected, clean)
			if !corruptPacket(undetected, true, rand.New(rand.NewPCG(uint64(len(undetected)), 9)).IntN) {
				t.Fatalf("v6=%v: a TCP packet with payload was not corrupted", v6)
			}
			if d := bitsDiffer(clean, undetected); d == 0 || d > 3 { // the flip, plus the checksum's bits
				t.Fatalf("v6=%v: %d bits differ", v6, d)
			}
			if bitsDiffer(clean[l4+32:], undetected[l4+32:]) != 1 {
				t.Fatalf("v6=%v: the payload does not differ in exactly one bit", v6)
			}
			checksumOK(t, undetected)
		}
		// Detected: exactly one bit anywhere; a checksum no longer agrees.
		detected := append([]byte(nil), clean...)
		if !corruptPacket(detected, false, func(n int) int { return n - 1 }) { // the last payload bit
			t.Fatal("not corrupted")
		}
		if bitsDiffer(clean, detected) != 1 {
			t.Fatalf("v6=%v: %d bits differ, want 1", v6, bitsDiffer(clean, detected))
		}
		if checksumProblem(detected) == "" {
			t.Errorf("v6=%v: the checksums still agree after a flip", v6)
		}
	}
	// A pure ACK has no payload to corrupt undetected.
	ack := tcpSuperPacket(false, nil, 9000, 0x10)[vnetHdrLen:]
	if corruptPacket(ack, true, rand.New(rand.NewPCG(1, 2)).IntN) {
		t.Error("an ACK without payload was corrupted undetected")
	}
}
