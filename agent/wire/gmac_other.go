//go:build !amd64

package wire

const haveWideGHASH = false

func ghashBlocks(tbl *ghashTable, acc *[16]byte, p *byte, n int) {
	panic("wire: no wide GHASH on this architecture")
}
