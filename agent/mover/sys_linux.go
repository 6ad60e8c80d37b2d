package mover

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

func setBufferControl(bytes int64) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) {
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, int(bytes))
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, int(bytes))
		})
	}
}

func fdatasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }

// syncfs makes everything written on f's file system durable, in one call.
func syncfs(f *os.File) error { return unix.Syncfs(int(f.Fd())) }
