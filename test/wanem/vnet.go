package wanem

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The virtio-net header that a TUN device opened with IFF_VNET_HDR puts in front of
// every packet (struct virtio_net_hdr, linux/virtio_net.h). The device is set to
// little-endian headers (TUNSETVNETLE), so the layout does not depend on the host.
const (
	vnetHdrLen = 10

	vnetFlagNeedsCsum = 1 // VIRTIO_NET_HDR_F_NEEDS_CSUM: L4 checksum is partial

	vnetGSONone  = 0
	vnetGSOTCPv4 = 1
	vnetGSOUDP   = 3
	vnetGSOTCPv6 = 4
	vnetGSOUDPL4 = 5
	vnetGSOECN   = 0x80
)

// vnetHdr is a decoded virtio-net header.
type vnetHdr struct {
	flags      uint8
	gsoType    uint8
	hdrLen     uint16
	gsoSize    uint16
	csumStart  uint16
	csumOffset uint16
}

func decodeVnetHdr(b []byte) vnetHdr {
	return vnetHdr{
		flags:      b[0],
		gsoType:    b[1],
		hdrLen:     binary.LittleEndian.Uint16(b[2:]),
		gsoSize:    binary.LittleEndian.Uint16(b[4:]),
		csumStart:  binary.LittleEndian.Uint16(b[6:]),
		csumOffset: binary.LittleEndian.Uint16(b[8:]),
	}
}

func (h vnetHdr) encode(b []byte) {
	b[0] = h.flags
	b[1] = h.gsoType
	binary.LittleEndian.PutUint16(b[2:], h.hdrLen)
	binary.LittleEndian.PutUint16(b[4:], h.gsoSize)
	binary.LittleEndian.PutUint16(b[6:], h.csumStart)
	binary.LittleEndian.PutUint16(b[8:], h.csumOffset)
}

// isTCPGSO reports whether the header describes a TCP super-packet that the kernel
// would cut into segments of gsoSize payload bytes.
func (h vnetHdr) isTCPGSO() bool {
	t := h.gsoType &^ vnetGSOECN
	return (t == vnetGSOTCPv4 || t == vnetGSOTCPv6) && h.gsoSize > 0
}

// superPacket describes the segments a packet read from the TUN stands for: what
// the wire would carry if the sender's NIC had done the segmentation.
type superPacket struct {
	hdr     vnetHdr
	l4Off   int // offset of the TCP header in the IP packet (GSO only)
	hdrLen  int // IP + TCP header bytes repeated in every segment (GSO only)
	payload int // TCP payload bytes in the whole super-packet (GSO only)
	segs    int // number of wire segments (1 for anything that is not TCP GSO)
	ipLen   int // length of the IP packet as read (without the virtio header)
}

var errMalformed = errors.New("malformed packet")

// parseSuperPacket inspects pkt (virtio header + IP packet, or a bare IP packet when
// vnet is false).
func parseSuperPacket(pkt []byte, vnet bool) (superPacket, error) {
	var sp superPacket
	ip := pkt
	if vnet {
		if len(pkt) < vnetHdrLen {
			return sp, errMalformed
		}
		sp.hdr = decodeVnetHdr(pkt)
		ip = pkt[vnetHdrLen:]
	}
	sp.ipLen = len(ip)
	sp.segs = 1
	if !vnet || !sp.hdr.isTCPGSO() {
		return sp, nil
	}
	l4, err := tcpOffset(ip)
	if err != nil {
		return sp, err
	}
	if len(ip) < l4+20 {
		return sp, errMalformed
	}
	tcpHdr := int(ip[l4+12]>>4) * 4
	if tcpHdr < 20 || len(ip) < l4+tcpHdr {
		return sp, errMalformed
	}
	sp.l4Off = l4
	sp.hdrLen = l4 + tcpHdr
	sp.payload = len(ip) - sp.hdrLen
	mss := int(sp.hdr.gsoSize)
	sp.segs = (sp.payload + mss - 1) / mss
	if sp.segs < 1 {
		sp.segs = 1
	}
	return sp, nil
}

// tcpOffset finds the TCP header of an IPv4 or IPv6 packet (IPv6 extension headers
// are not walked: a GSO TCPv6 packet from the local stack carries none).
func tcpOffset(ip []byte) (int, error) {
	if len(ip) < 1 {
		return 0, errMalformed
	}
	switch ip[0] >> 4 {
	case 4:
		if len(ip) < 20 {
			return 0, errMalformed
		}
		ihl := int(ip[0]&0x0f) * 4
		if ihl < 20 || ip[9] != 6 {
			return 0, errMalformed
		}
		return ihl, nil
	case 6:
		if len(ip) < 40 || ip[6] != 6 {
			return 0, errMalformed
		}
		return 40, nil
	}
	return 0, errMalformed
}

// segmentWireLen is the size on the wire of segment i of sp: the repeated headers, its
// share of the payload, and the configured per-packet overhead.
func (sp *superPacket) segmentWireLen(i int) int {
	if sp.segs == 1 {
		return sp.ipLen
	}
	mss := int(sp.hdr.gsoSize)
	n := mss
	if i == sp.segs-1 {
		n = sp.payload - mss*(sp.segs-1)
	}
	return sp.hdrLen + n
}

// writeSegment writes into dst (which must hold vnetHdrLen+sp.hdrLen+mss bytes) segment
// i of the TCP super-packet ip as one complete packet with a full checksum and an empty
// virtio header, and returns its length including the virtio header. The rules are the
// kernel's (tcp_gso_segment, inet_gso_segment): sequence numbers advance by the
// payload, IPv4 IDs by one, FIN and PSH stay on the last segment, CWR on the first.
func (sp *superPacket) writeSegment(dst, ip []byte, i int) (int, error) {
	if sp.segs <= 1 || i < 0 || i >= sp.segs {
		return 0, fmt.Errorf("segment %d of %d: %w", i, sp.segs, errMalformed)
	}
	mss := int(sp.hdr.gsoSize)
	start := sp.hdrLen + i*mss
	end := start + mss
	if end > len(ip) {
		end = len(ip)
	}
	n := sp.hdrLen + (end - start)
	if len(dst) < vnetHdrLen+n {
		return 0, fmt.Errorf("segment buffer of %d bytes for %d: %w", len(dst), vnetHdrLen+n, errMalformed)
	}
	vnetHdr{}.encode(dst)
	out := dst[vnetHdrLen : vnetHdrLen+n]
	copy(out, ip[:sp.hdrLen])
	copy(out[sp.hdrLen:], ip[start:end])

	l4 := sp.l4Off
	tcp := out[l4:]
	seq := binary.BigEndian.Uint32(tcp[4:])
	binary.BigEndian.PutUint32(tcp[4:], seq+uint32(i*mss))
	const fin, psh, cwr = 0x01, 0x08, 0x80
	if i != sp.segs-1 {
		tcp[13] &^= fin | psh
	}
	if i != 0 {
		tcp[13] &^= cwr
	}

	if out[0]>>4 == 4 {
		binary.BigEndian.PutUint16(out[2:], uint16(n))
		id := binary.BigEndian.Uint16(out[4:])
		binary.BigEndian.PutUint16(out[4:], id+uint16(i))
		out[10], out[11] = 0, 0
		binary.BigEndian.PutUint16(out[10:], ^fold(sum16(out[:l4], 0)))
	} else {
		binary.BigEndian.PutUint16(out[4:], uint16(n-40))
	}
	if err := setTCPChecksum(out, l4); err != nil {
		return 0, err
	}
	return vnetHdrLen + n, nil
}

// setTCPChecksum writes the full TCP checksum of the IPv4 or IPv6 packet ip, whose TCP
// header starts at l4 and whose IP header's lengths are already right.
func setTCPChecksum(ip []byte, l4 int) error {
	tcpLen := len(ip) - l4
	var pseudo uint32
	switch ip[0] >> 4 {
	case 4:
		pseudo = sum16(ip[12:20], 0) + 6 + uint32(tcpLen)
	case 6:
		pseudo = sum16(ip[8:40], 0) + 6 + uint32(tcpLen)
	default:
		return errMalformed
	}
	tcp := ip[l4:]
	tcp[16], tcp[17] = 0, 0
	binary.BigEndian.PutUint16(tcp[16:], ^fold(sum16(tcp[:tcpLen], pseudo)))
	return nil
}

// completeChecksum does what a NIC does with a packet whose virtio header says its
// layer-4 checksum is partial (VIRTIO_NET_HDR_F_NEEDS_CSUM): sums from csum_start to
// the end (the field holds the pseudo-header's sum) and stores the complement at
// csum_start+csum_offset, then clears the flag, so that the far stack checks the
// checksum instead of trusting it. pkt is the virtio header and the IP packet.
func completeChecksum(pkt []byte) error {
	h := decodeVnetHdr(pkt)
	if h.flags&vnetFlagNeedsCsum == 0 {
		return nil
	}
	ip := pkt[vnetHdrLen:]
	start, field := int(h.csumStart), int(h.csumStart)+int(h.csumOffset)
	if start >= len(ip) || field+2 > len(ip) {
		return errMalformed
	}
	binary.BigEndian.PutUint16(ip[field:], ^fold(sum16(ip[start:], 0)))
	h.flags &^= vnetFlagNeedsCsum
	h.encode(pkt)
	return nil
}

// corruptPacket flips one bit of the complete IP packet ip (checksums computed, no
// GSO), at the position pick(n) chooses among n: anywhere in the packet, or, when
// undetected, in the TCP payload with the TCP checksum made to agree. It reports
// whether it flipped anything (an undetected corruption needs TCP payload).
func corruptPacket(ip []byte, undetected bool, pick func(int) int) bool {
	if !undetected {
		if len(ip) == 0 {
			return false
		}
		bit := pick(len(ip) * 8)
		ip[bit/8] ^= 1 << (bit % 8)
		return true
	}
	l4, err := tcpOffset(ip)
	if err != nil || len(ip) < l4+20 {
		return false
	}
	payload := l4 + int(ip[l4+12]>>4)*4
	if payload >= len(ip) {
		return false
	}
	bit := pick((len(ip) - payload) * 8)
	ip[payload+bit/8] ^= 1 << (bit % 8)
	return setTCPChecksum(ip, l4) == nil
}

// sum16 adds b as big-endian 16-bit words to the running one's-complement sum acc
// (not yet folded). It reads eight bytes at a time; the carries fit in 64 bits.
func sum16(b []byte, acc uint32) uint32 {
	s := uint64(acc)
	for len(b) >= 8 {
		v := binary.BigEndian.Uint64(b)
		s += v >> 48
		s += (v >> 32) & 0xffff
		s += (v >> 16) & 0xffff
		s += v & 0xffff
		b = b[8:]
	}
	for len(b) >= 2 {
		s += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint64(b[0]) << 8
	}
	for s>>32 != 0 {
		s = (s & 0xffffffff) + (s >> 32)
	}
	return uint32(s)
}

func fold(s uint32) uint16 {
	for s>>16 != 0 {
		s = (s & 0xffff) + (s >> 16)
	}
	return uint16(s)
}
