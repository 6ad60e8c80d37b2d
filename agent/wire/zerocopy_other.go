//go:build !linux

package wire

import (
	"bufio"
	"net"
	"os"
)

// zeroCopy has no kernel paths here: WriteFrameFile and SpliceData copy through a buffer.
type zeroCopy struct{ br *bufio.Reader }

func newZeroCopy(net.Conn) *zeroCopy                    { return nil }
func (z *zeroCopy) close()                              {}
func (z *zeroCopy) owe(int64)                           {}
func (z *zeroCopy) delivered(int64)                     {}
func (z *zeroCopy) read([]byte) (int, error)            { panic("unreachable") }
func (z *zeroCopy) sendMore([]byte) error               { panic("unreachable") }
func (z *zeroCopy) sendfile(*os.File, int64, int) error { panic("unreachable") }
func (z *zeroCopy) splice(*os.File, int64, int64, Gate) error {
	panic("unreachable")
}
