//go:build !amd64

package wire

const haveWideGHASH, haveZMMGHASH = false, false

func ghash(tbl *ghashTable, tbl64 *ghashTable64, acc *[16]byte, p []byte) {
	panic("wire: no wide GHASH on this architecture")
}
