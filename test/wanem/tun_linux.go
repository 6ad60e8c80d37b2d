package wanem

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Offload features asked of the TUN device (linux/if_tun.h). With them the kernel
// hands over TCP super-packets of up to 64 KiB with a partial checksum instead of one
// packet per MTU, and accepts them back on the other side.
const (
	tunFCsum   = 0x01 // TUN_F_CSUM
	tunFTSO4   = 0x02 // TUN_F_TSO4
	tunFTSO6   = 0x04 // TUN_F_TSO6
	tunFTSOECN = 0x08 // TUN_F_TSO_ECN

	tunOffloads = tunFCsum | tunFTSO4 | tunFTSO6 | tunFTSOECN
)

// openTUN creates the TUN device name in network namespace ns and returns its
// non-blocking descriptor. The device is not persistent: it disappears, with its
// addresses and routes, when the descriptor is closed or the process dies.
func openTUN(ns, name string, offload bool) (int, error) {
	tun := -1
	err := inNetns(ns, func() error {
		fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			return fmt.Errorf("open /dev/net/tun: %w", err)
		}
		ifr, err := unix.NewIfreq(name)
		if err != nil {
			unix.Close(fd)
			return fmt.Errorf("interface name %q: %w", name, err)
		}
		flags := uint16(unix.IFF_TUN | unix.IFF_NO_PI)
		if offload {
			flags |= unix.IFF_VNET_HDR
		}
		ifr.SetUint16(flags)
		if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
			unix.Close(fd)
			return fmt.Errorf("create TUN %s: %w", name, err)
		}
		if offload {
			if err := unix.IoctlSetPointerInt(fd, unix.TUNSETVNETLE, 1); err != nil {
				unix.Close(fd)
				return fmt.Errorf("TUN %s little-endian virtio header: %w", name, err)
			}
			if err := unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, tunOffloads); err != nil {
				unix.Close(fd)
				return fmt.Errorf("TUN %s offloads: %w", name, err)
			}
		}
		tun = fd
		return nil
	})
	return tun, err
}
