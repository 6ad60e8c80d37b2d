package wire

import (
	"bufio"
	"crypto/aes"
	"crypto/cipher"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"sync"
)

// TagSize is the size of the tag every frame ends with.
const TagSize = 16

// ErrAuth is returned for a frame whose tag does not match: it was corrupted or
// tampered with in flight, dropped, reordered or replayed. The connection cannot be
// trusted after it.
var ErrAuth = errors.New("wire: frame failed authentication (corrupted or tampered with in flight)")

// IsIntegrity says whether err means that what arrived is not what the peer sent: a
// tag that does not match, or a header that breaks the protocol (the peer is
// authenticated, so a malformed frame was damaged on the way).
func IsIntegrity(err error) bool { return errors.Is(err, ErrAuth) || errors.Is(err, ErrFrame) }

// frameMAC tags the frames of one direction of one connection. A frame's tag is
//
//	GMAC(k, n‖frame, header ‖ meta ‖ GMAC(k, n‖data, data))
//
// with n the frame's number on the connection: the inner GMAC lets the data be
// authenticated where it lies (a block buffer) without copying it next to its
// header, and the outer one binds the header, the meta and the data's tag together.
// GMAC is AES-GCM with everything as additional data, run on the CPU's AES-NI and
// carry-less multiply instructions: where the CPU multiplies two blocks per
// instruction (VPCLMULQDQ on YMM registers), or four (on ZMM, with AVX-512), our own
// GHASH (wideGMAC) computes it, otherwise the standard library's GCM, which multiplies
// one; the tag is the same
// (BenchmarkPrimitives has the speeds of both and of the CRC32C it replaced).
// Numbering the frames
// makes a dropped, reordered or replayed frame fail like a changed one, and keys
// differ per connection (package auth), so no frame is valid on another connection.
//
// A frame with FlagEncrypted also has its meta and data encrypted before they are
// tagged (encrypt-then-MAC): AES-256 in counter mode under the direction's second key
// (VAES on ZMM registers where the CPU has it, vaesCTR; the same key stream),
// the counter block starting at the frame's number, so no two frames of a connection
// share key stream. The header stays in the clear (its lengths frame the stream) but
// under the tag.
type frameMAC struct {
	aead    cipher.AEAD
	wide    *wideGMAC    // nil: the CPU lacks what it needs, aead tags
	enc     cipher.Block // nil: the direction cannot encrypt (a test's sealer)
	vctr    *vaesCTR     // nil: the CPU lacks VAES, the standard library's CTR encrypts
	counter uint64
	nonce   [12]byte
	inner   [TagSize]byte
	scratch []byte
	iv      [16]byte
	// fixed is the data of the last fixed frame (Writer.WriteFixedFrame) and
	// fixedHash its GHASH (dataTag).
	fixed     []byte
	fixedHash [16]byte
}

const (
	nonceData  = 1
	nonceFrame = 2
	ivMeta     = 3
	ivData     = 4
)

func newFrameMAC(key []byte) *frameMAC { return newFrameSealer(Keys{MAC: key}) }

func newFrameSealer(k Keys) *frameMAC {
	block, err := aes.NewCipher(k.MAC)
	if err != nil {
		panic(err) // the key size is fixed by the caller
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	m := &frameMAC{aead: aead, wide: newWideGMAC(block)}
	if len(k.Enc) > 0 {
		if m.enc, err = aes.NewCipher(k.Enc); err != nil {
			panic(err)
		}
		m.vctr = newVAESCTR(k.Enc, m.enc)
	}
	return m
}

// crypt encrypts or decrypts src into dst (they may be the same slice) with the key
// stream of part (ivMeta or ivData) of frame number n.
func (m *frameMAC) crypt(dst, src []byte, part byte, n uint64) {
	m.iv = [16]byte{0: part}
	binary.BigEndian.PutUint64(m.iv[1:], n)
	if m.vctr != nil {
		m.vctr.xorKeyStream(dst, src, &m.iv)
		return
	}
	cipher.NewCTR(m.enc, m.iv[:]).XORKeyStream(dst, src)
}

// sum appends the tag of the next frame to dst. withData false leaves the data out of
// the tag (FlagDataOutsideTag); fixed says data is the same bytes whenever the same
// slice comes again (a generated block never changed, Writer.WriteFixedFrame).
func (m *frameMAC) sum(dst, hdr, meta, data []byte, withData, fixed bool) []byte {
	binary.BigEndian.PutUint64(m.nonce[4:], m.counter)
	m.counter++
	var inner []byte
	if withData && len(data) > 0 {
		m.nonce[0] = nonceData
		inner = m.dataTag(data, fixed)
	}
	m.nonce[0] = nonceFrame
	m.scratch = append(append(append(m.scratch[:0], hdr...), meta...), inner...)
	out := m.gmac(dst, m.scratch)
	if cap(m.scratch) > 64<<10 {
		m.scratch = nil // a large control frame (a summary) need not pin its buffer
	}
	return out
}

// dataTag is the GMAC of a frame's data under m.nonce, in m.inner. A fixed slice's
// GHASH is taken once and kept while the same slice comes again: a GMAC tag is the
// GHASH of the data, which the nonce does not change, XORed with the encrypted nonce.
func (m *frameMAC) dataTag(data []byte, fixed bool) []byte {
	if !fixed || m.wide == nil {
		return m.gmac(m.inner[:0], data)
	}
	if len(m.fixed) != len(data) || &m.fixed[0] != &data[0] {
		m.fixed, m.fixedHash = data, m.wide.hash(data)
	}
	return m.wide.finish(m.inner[:0], &m.nonce, &m.fixedHash)
}

// gmac appends GMAC(k, m.nonce, aad) to dst.
func (m *frameMAC) gmac(dst, aad []byte) []byte {
	if m.wide != nil {
		return m.wide.sum(dst, &m.nonce, aad)
	}
	return m.aead.Seal(dst, m.nonce[:], nil, aad)
}

// check reports whether tag is the next frame's tag.
func (m *frameMAC) check(tag, hdr, meta, data []byte, withData bool) bool {
	var want [TagSize]byte
	return subtle.ConstantTimeCompare(m.sum(want[:0], hdr, meta, data, withData, false), tag) == 1
}

// Conn is a connection after the handshake: every frame written through it carries a
// tag under the session key of its direction, and every frame read through it is
// checked. A Conn has one Writer and one Reader, because the frames of a direction are
// numbered.
type Conn struct {
	net.Conn
	w  *Writer
	zc *zeroCopy

	readOnce sync.Once
	recv     *frameMAC
	r        *Reader
	// first, when set, reads what precedes the first frame (CheckFirst).
	first func(io.Reader) error
}

// Keys are one direction's session keys: MAC tags every frame, Enc encrypts the meta
// and data of frames that ask for it (FlagEncrypted).
type Keys struct {
	MAC, Enc []byte
}

// NewConn wraps c, whose handshake gave the keys of each direction.
func NewConn(c net.Conn, send, recv Keys) *Conn {
	zc := newZeroCopy(c)
	w := newWriter(c, newFrameSealer(send))
	w.zc = zc
	return &Conn{Conn: c, w: w, zc: zc, recv: newFrameSealer(recv)}
}

// Close closes the connection and what its zero-copy paths hold (a pipe).
func (c *Conn) Close() error {
	c.zc.close()
	return c.Conn.Close()
}

// CheckFirst makes check read what must come before the first frame (a handshake's
// last word, auth.ReadVerdict) at the reader's first read; its error is every read's.
// It must be called before Reader.
func (c *Conn) CheckFirst(check func(io.Reader) error) { c.first = check }

// checkedReader runs check on r before the first read. A check that read nothing
// because a deadline passed (a reader woken to look at something else) is run again
// at the next read; any other failure is every read's.
type checkedReader struct {
	r     io.Reader
	check func(io.Reader) error
	done  bool
	err   error
}

func (c *checkedReader) Read(p []byte) (int, error) {
	if !c.done {
		if err := c.check(c.r); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return 0, err
			}
			c.err = err
		}
		c.done = true
	}
	if c.err != nil {
		return 0, c.err
	}
	return c.r.Read(p)
}

// NetConn is the underlying connection (for TCP_INFO and socket options).
func (c *Conn) NetConn() net.Conn { return c.Conn }

// Writer is the connection's frame writer.
func (c *Conn) Writer() *Writer { return c.w }

// Reader is the connection's frame reader, reading through a buffer of bufSize bytes;
// the size given at the first call stays.
func (c *Conn) Reader(bufSize int) *Reader {
	c.readOnce.Do(func() {
		var src io.Reader = c.Conn
		if c.zc != nil {
			src = socketReader{zc: c.zc}
		}
		if c.first != nil {
			src = &checkedReader{r: src, check: c.first}
		}
		br := bufio.NewReaderSize(src, bufSize)
		c.r = newReader(br, c.recv)
		if c.zc != nil {
			c.zc.br = br
			c.r.zc = c.zc
		}
	})
	return c.r
}
