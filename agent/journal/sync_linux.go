package journal

import (
	"os"

	"golang.org/x/sys/unix"
)

// fdatasync makes f's data durable, on its descriptor held open meanwhile (Control): a
// number from f.Fd() that a concurrent Close freed could belong to another file by the
// time it is synced.
func fdatasync(f *os.File) error {
	c, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var syncErr error
	if err := c.Control(func(fd uintptr) { syncErr = unix.Fdatasync(int(fd)) }); err != nil {
		return err
	}
	return syncErr
}
