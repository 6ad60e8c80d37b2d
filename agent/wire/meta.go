package wire

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Castagnoli is the CRC32C table; hash/crc32 uses the SSE4.2 instruction with it.
var Castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC32C returns the in-flight checksum of b.
func CRC32C(b []byte) uint32 { return crc32.Update(0, Castagnoli, b) }

const (
	blockMetaSize = 20
	memMetaSize   = 4
	fileMetaFixed = 8 + 8 + 4 + 8 + 4 + 1 + 1 + 2
)

// BlockMeta is the meta of a Block frame: which chunk, where in the file, and, when
// the frame's data is outside its tag (FlagDataOutsideTag), the data's CRC32C.
type BlockMeta struct {
	Chunk  uint64 // the chunk's id within the session (ChunkOpen.ID)
	Offset uint64 // offset of the block in the file
	CRC    uint32
}

// Put encodes m into b, which must have room for it, and returns the encoded bytes.
func (m BlockMeta) Put(b []byte) []byte {
	b = b[:blockMetaSize]
	binary.BigEndian.PutUint64(b[0:], m.Chunk)
	binary.BigEndian.PutUint64(b[8:], m.Offset)
	binary.BigEndian.PutUint32(b[16:], m.CRC)
	return b
}

// ParseBlockMeta decodes a Block frame's meta.
func ParseBlockMeta(b []byte) (BlockMeta, error) {
	if len(b) != blockMetaSize {
		return BlockMeta{}, fmt.Errorf("%w: block meta of %d bytes", ErrFrame, len(b))
	}
	return BlockMeta{Chunk: binary.BigEndian.Uint64(b), Offset: binary.BigEndian.Uint64(b[8:]), CRC: binary.BigEndian.Uint32(b[16:])}, nil
}

// MemMeta is the meta of a Mem frame: nothing yet (a Mem frame's data is generated
// and discarded; whether its tag covers it is the frame's FlagDataOutsideTag).
type MemMeta struct{}

// Put encodes m into b.
func (m MemMeta) Put(b []byte) []byte {
	b = b[:memMetaSize]
	clear(b)
	return b
}

// ParseMemMeta decodes a Mem frame's meta.
func ParseMemMeta(b []byte) (MemMeta, error) {
	if len(b) != memMetaSize {
		return MemMeta{}, fmt.Errorf("%w: mem meta of %d bytes", ErrFrame, len(b))
	}
	return MemMeta{}, nil
}

// FileFlag qualifies a File frame.
type FileFlag uint8

const (
	// FileVerify asks the receiver to read the file back and compare its digest.
	FileVerify FileFlag = 1 << iota
)

// FileMeta is the meta of a File frame: a whole small file in one frame, so that small
// files cost no round trip each. CRC is the data's CRC32C when the data is outside the
// frame's tag (FlagDataOutsideTag).
type FileMeta struct {
	Unit    uint64 // the sender's id for this file, echoed in the result
	Size    uint64 // equals the frame's data length
	Mode    uint32 // permission bits
	MtimeNs int64
	CRC     uint32
	Flags   FileFlag
	Digest  []byte // end-to-end digest of the source (may be empty when not verifying)
	Path    string // destination path relative to the receiver's root
}

// MaxFileMeta is the largest encoded FileMeta.
const MaxFileMeta = fileMetaFixed + MaxDigest + MaxPath

// Append encodes m after b.
func (m FileMeta) Append(b []byte) ([]byte, error) {
	if len(m.Digest) > MaxDigest || len(m.Path) > MaxPath {
		return nil, fmt.Errorf("wire: file meta too large (digest %d, path %d)", len(m.Digest), len(m.Path))
	}
	b = binary.BigEndian.AppendUint64(b, m.Unit)
	b = binary.BigEndian.AppendUint64(b, m.Size)
	b = binary.BigEndian.AppendUint32(b, m.Mode)
	b = binary.BigEndian.AppendUint64(b, uint64(m.MtimeNs))
	b = binary.BigEndian.AppendUint32(b, m.CRC)
	b = append(b, byte(m.Flags), byte(len(m.Digest)))
	b = binary.BigEndian.AppendUint16(b, uint16(len(m.Path)))
	b = append(b, m.Digest...)
	b = append(b, m.Path...)
	return b, nil
}

// ParseFileMeta decodes a File frame's meta. Digest aliases b.
func ParseFileMeta(b []byte) (FileMeta, error) {
	if len(b) < fileMetaFixed {
		return FileMeta{}, fmt.Errorf("%w: file meta of %d bytes", ErrFrame, len(b))
	}
	m := FileMeta{
		Unit:    binary.BigEndian.Uint64(b),
		Size:    binary.BigEndian.Uint64(b[8:]),
		Mode:    binary.BigEndian.Uint32(b[16:]),
		MtimeNs: int64(binary.BigEndian.Uint64(b[20:])),
		CRC:     binary.BigEndian.Uint32(b[28:]),
		Flags:   FileFlag(b[32]),
	}
	dl := int(b[33])
	pl := int(binary.BigEndian.Uint16(b[34:]))
	if dl > MaxDigest || pl > MaxPath || pl == 0 || len(b) != fileMetaFixed+dl+pl {
		return FileMeta{}, fmt.Errorf("%w: file meta lengths digest %d path %d in %d bytes", ErrFrame, dl, pl, len(b))
	}
	m.Digest = b[fileMetaFixed : fileMetaFixed+dl]
	m.Path = string(b[fileMetaFixed+dl:])
	return m, nil
}
