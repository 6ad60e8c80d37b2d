//go:build !amd64

package wire

const haveVAES = false

func ctrXORZMM(rk *[15 * 16]byte, rounds int, ctr *[16]byte, dst, src *byte, groups int) {
	panic("wire: no VAES on this architecture")
}
