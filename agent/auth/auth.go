// Package auth is the mutual HMAC-SHA256 challenge-response every dtnflow-agent
// connection starts with. Both peers prove they hold the job's shared secret without
// sending it; a peer that cannot is refused before any frame is read.
//
//	client → server: "DTNF" v cn[32]
//	server → client: "DTNF" v sn[32] HMAC(k, "dtnflow/server" ‖ cn ‖ sn)
//	client → server: HMAC(k, "dtnflow/client" ‖ sn ‖ cn)
//	server → client: 'K' (accepted) or 'R' (refused), then close
//
// A client that has checked the server's proof may send its first frames right behind
// its own (ClientProof) and read the verdict before the first frame it reads
// (ReadVerdict): the server reads nothing past the proof until it has checked it, and
// the client already knows the server holds the secret, so nothing is told to a peer
// that does not. That saves every connection a round trip before its first frame.
//
// The two labels differ, so neither side can be used as an oracle for the other's
// proof; fresh nonces on both sides stop replays.
//
// The handshake also gives the connection its session keys: HKDF-SHA256 of the secret
// with both nonces as salt, one key per direction. Every frame that follows carries a
// tag under them (package wire), so proving the secret once is not the end of the
// protection: a relay on the path that rewrites a frame after the handshake is caught
// at the next frame. Fresh nonces make the keys of every connection different, so a
// frame recorded on one connection cannot be replayed on another.
package auth

import (
	"bytes"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

// Magic starts every dtnflow-agent connection; the listener uses it to tell the
// protocol from HTTP on the same port.
const Magic = "DTNF"

// Version is the protocol version. 2: every frame after the handshake carries a tag
// under the session keys.
const Version = 2

// KeySize is the size of a session key (AES-256).
const KeySize = 32

// Keys are a connection's session keys: per direction, one that tags frames and one
// that encrypts them when the job asks for confidentiality.
type Keys struct {
	ClientToServer, ServerToClient       [KeySize]byte
	ClientToServerEnc, ServerToClientEnc [KeySize]byte
}

// deriveKeys expands the secret into the session keys of the connection whose nonces
// are cn and sn.
func deriveKeys(secret, cn, sn []byte) (Keys, error) {
	salt := append(append([]byte(nil), cn...), sn...)
	b, err := hkdf.Key(sha256.New, secret, salt, "dtnflow/v2 frame keys", 4*KeySize)
	if err != nil {
		return Keys{}, err
	}
	var k Keys
	copy(k.ClientToServer[:], b[:KeySize])
	copy(k.ServerToClient[:], b[KeySize:])
	copy(k.ClientToServerEnc[:], b[2*KeySize:])
	copy(k.ServerToClientEnc[:], b[3*KeySize:])
	return k, nil
}

// Timeout bounds the handshake.
const Timeout = 10 * time.Second

const nonceSize = 32

// ErrRefused is returned by Client and ReadVerdict when the server refused our proof,
// and by Server for a peer whose proof was wrong.
var ErrRefused = errors.New("authentication refused: the peer does not hold the same job secret")

// ErrNotProtocol is returned by Server for a peer that does not open with the
// protocol's magic and version.
var ErrNotProtocol = errors.New("not dtnflow-agent protocol")

// LoadSecret reads a secret file; surrounding whitespace (a trailing newline) is
// dropped. A secret shorter than 16 bytes is refused.
func LoadSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading secret file: %w", err)
	}
	b = bytes.TrimSpace(b)
	if len(b) < 16 {
		return nil, fmt.Errorf("secret file %s holds %d bytes; at least 16 are needed", path, len(b))
	}
	return b, nil
}

func mac(secret []byte, label string, a, b []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	m.Write(a)
	m.Write(b)
	return m.Sum(nil)
}

// Client runs the client side of the handshake on c, the server's verdict included,
// and returns the session keys.
func Client(c net.Conn, secret []byte) (Keys, error) {
	keys, err := ClientProof(c, secret)
	if err != nil {
		return Keys{}, err
	}
	c.SetReadDeadline(time.Now().Add(Timeout))
	defer c.SetReadDeadline(time.Time{})
	if err := ReadVerdict(c); err != nil {
		if !errors.Is(err, ErrRefused) {
			err = fmt.Errorf("%w (no verdict: %v)", ErrRefused, err)
		}
		return Keys{}, err
	}
	return keys, nil
}

// ReadVerdict reads the server's verdict on the client's proof: nil when accepted,
// ErrRefused when refused, and the read's own error when there was nothing to read
// (a deadline, a closed connection: no verdict, so no refusal).
func ReadVerdict(r io.Reader) error {
	var verdict [1]byte
	if _, err := io.ReadFull(r, verdict[:]); err != nil {
		return err
	}
	if verdict[0] != 'K' {
		return ErrRefused
	}
	return nil
}

// ClientProof runs the client side of the handshake up to its proof and returns the
// session keys, without waiting for the server's verdict: the caller may write frames
// at once, and must read the verdict (ReadVerdict) before anything else it reads.
func ClientProof(c net.Conn, secret []byte) (Keys, error) {
	c.SetDeadline(time.Now().Add(Timeout))
	defer c.SetDeadline(time.Time{})
	cn := make([]byte, nonceSize)
	rand.Read(cn)
	hello := append([]byte(Magic), Version)
	if _, err := c.Write(append(hello, cn...)); err != nil {
		return Keys{}, fmt.Errorf("handshake: %w", err)
	}
	resp := make([]byte, len(Magic)+1+nonceSize+sha256.Size)
	if _, err := io.ReadFull(c, resp); err != nil {
		return Keys{}, fmt.Errorf("handshake: %w (is the peer a dtnflow-agent that accepts this secret?)", err)
	}
	if string(resp[:4]) != Magic || resp[4] != Version {
		return Keys{}, fmt.Errorf("handshake: the peer does not speak dtnflow-agent protocol v%d", Version)
	}
	sn := resp[5 : 5+nonceSize]
	if !hmac.Equal(resp[5+nonceSize:], mac(secret, "dtnflow/server", cn, sn)) {
		return Keys{}, fmt.Errorf("handshake: the server's proof is wrong: %w", ErrRefused)
	}
	if _, err := c.Write(mac(secret, "dtnflow/client", sn, cn)); err != nil {
		return Keys{}, fmt.Errorf("handshake: %w", err)
	}
	return deriveKeys(secret, cn, sn)
}

// Server runs the server side on c, whose first bytes (the magic) may already have
// been consumed by the caller's sniffing: pass them as seen (nil if none). It returns
// the session keys.
func Server(c net.Conn, seen []byte, secret []byte) (Keys, error) {
	c.SetDeadline(time.Now().Add(Timeout))
	defer c.SetDeadline(time.Time{})
	hello := make([]byte, len(Magic)+1+nonceSize)
	n := copy(hello, seen)
	if _, err := io.ReadFull(c, hello[n:]); err != nil {
		return Keys{}, fmt.Errorf("handshake: %w", err)
	}
	if string(hello[:4]) != Magic || hello[4] != Version {
		return Keys{}, fmt.Errorf("handshake: %w v%d", ErrNotProtocol, Version)
	}
	cn := hello[5:]
	sn := make([]byte, nonceSize)
	rand.Read(sn)
	resp := append(append([]byte(Magic), Version), sn...)
	resp = append(resp, mac(secret, "dtnflow/server", cn, sn)...)
	if _, err := c.Write(resp); err != nil {
		return Keys{}, fmt.Errorf("handshake: %w", err)
	}
	proof := make([]byte, sha256.Size)
	if _, err := io.ReadFull(c, proof); err != nil {
		return Keys{}, fmt.Errorf("handshake: %w", err)
	}
	if !hmac.Equal(proof, mac(secret, "dtnflow/client", sn, cn)) {
		c.Write([]byte{'R'})
		return Keys{}, ErrRefused
	}
	if _, err := c.Write([]byte{'K'}); err != nil {
		return Keys{}, err
	}
	return deriveKeys(secret, cn, sn)
}
