package wanem

import (
	"encoding/binary"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// tunDrops reads, from the kernel, how many packets the TUN name in namespace ns
// dropped on transmit: packets the stack sent into the link that the emulator did not
// read in time (its queue of TxQueueLen was full). They are losses the configuration
// did not ask for, so Stats reports them.
func tunDrops(ns, name string) (uint64, error) {
	var drops uint64
	found := false
	err := inNetns(ns, func() error {
		rib, err := syscall.NetlinkRIB(unix.RTM_GETLINK, unix.AF_UNSPEC)
		if err != nil {
			return err
		}
		msgs, err := syscall.ParseNetlinkMessage(rib)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if m.Header.Type != unix.RTM_NEWLINK || len(m.Data) < unix.SizeofIfInfomsg {
				continue
			}
			attrs, err := syscall.ParseNetlinkRouteAttr(&m)
			if err != nil {
				continue
			}
			var ifname string
			var stats []byte
			for _, a := range attrs {
				switch a.Attr.Type {
				case unix.IFLA_IFNAME:
					ifname = string(trimNUL(a.Value))
				case unix.IFLA_STATS64:
					stats = a.Value
				}
			}
			// struct rtnl_link_stats64: rx_packets, tx_packets, rx_bytes, tx_bytes,
			// rx_errors, tx_errors, rx_dropped, tx_dropped, ...
			if ifname == name && len(stats) >= 8*8 {
				drops = binary.NativeEndian.Uint64(stats[7*8:])
				found = true
			}
		}
		return nil
	})
	if err == nil && !found {
		err = fmt.Errorf("no interface %s", name)
	}
	return drops, err
}

func trimNUL(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}
