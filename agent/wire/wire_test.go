package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	data := bytes.Repeat([]byte("x"), 100<<10)
	fm, err := FileMeta{Unit: 9, Size: uint64(len(data)), Mode: 0o640, MtimeNs: 123, CRC: CRC32C(data), Flags: FileVerify, Digest: []byte{1, 2, 3}, Path: "a/b.dat"}.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFrame(TypeFile, fm, data); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteJSON(TypeChunkEnd, ChunkEnd{ID: 4, Blocks: 2}); err != nil {
		t.Fatal(err)
	}
	r := NewReader(&buf)
	h, meta, err := r.Next()
	if err != nil || h.Type != TypeFile {
		t.Fatalf("first frame: %+v %v", h, err)
	}
	m, err := ParseFileMeta(meta)
	if err != nil || m.Path != "a/b.dat" || m.Unit != 9 || !bytes.Equal(m.Digest, []byte{1, 2, 3}) {
		t.Fatalf("file meta %+v %v", m, err)
	}
	got := make([]byte, h.DataLen)
	if err := r.ReadData(got); err != nil || CRC32C(got) != m.CRC {
		t.Fatalf("data: %v", err)
	}
	h, meta, err = r.Next()
	var ce ChunkEnd
	if err != nil || h.Type != TypeChunkEnd || DecodeJSON(meta, &ce) != nil || ce.ID != 4 {
		t.Fatalf("second frame: %+v %v %+v", h, err, ce)
	}
}

func TestReaderRefusesOversizedLengths(t *testing.T) {
	cases := map[string]Header{
		"control frame with data": {Type: TypeChunkEnd, MetaLen: 2, DataLen: 1},
		"control meta too big":    {Type: TypeSummary, MetaLen: MaxMeta + 1},
		"data too big":            {Type: TypeBlock, MetaLen: blockMetaSize, DataLen: MaxData + 1},
		"block meta wrong size":   {Type: TypeBlock, MetaLen: 1 << 30},
		"unknown type":            {Type: 99},
	}
	for name, h := range cases {
		t.Run(name, func(t *testing.T) {
			b := make([]byte, HeaderSize)
			PutHeader(b, h)
			_, _, err := NewReader(bytes.NewReader(b)).Next()
			if !errors.Is(err, ErrFrame) {
				t.Fatalf("Next() = %v, want ErrFrame", err)
			}
		})
	}
}

// TestProbeRequestSettle: a request from an older coordinator, without settle, keeps
// the fixed-length sample; settle survives the round trip.
func TestProbeRequestSettle(t *testing.T) {
	var old ProbeRequest
	if err := DecodeJSON([]byte(`{"streams":2,"bufferBytes":65536,"seconds":5}`), &old); err != nil || old.Settle ||
		old != (ProbeRequest{Streams: 2, BufferBytes: 64 << 10, Seconds: 5}) {
		t.Errorf("older request decoded as %+v (%v)", old, err)
	}
	var buf bytes.Buffer
	want := ProbeRequest{Streams: 4, Seconds: 5, Settle: true}
	NewWriter(&buf).WriteJSON(TypeProbeRequest, want)
	h, meta, err := NewReader(&buf).Next()
	var got ProbeRequest
	if err != nil || h.Type != TypeProbeRequest || DecodeJSON(meta, &got) != nil || got != want {
		t.Errorf("round trip: %+v (%v), want %+v", got, err, want)
	}
}

// FuzzReader feeds arbitrary bytes to the decoder: it must never panic, and never
// hold a meta buffer larger than the limits allow.
func FuzzReader(f *testing.F) {
	var seed bytes.Buffer
	w := NewWriter(&seed)
	fm, _ := FileMeta{Unit: 1, Size: 3, Path: "p"}.Append(nil)
	w.WriteFrame(TypeFile, fm, []byte("abc"))
	w.WriteFrame(TypeBlock, BlockMeta{Chunk: 1, Offset: 8, CRC: 5}.Put(make([]byte, 32)), []byte("zz"))
	w.WriteJSON(TypeChunkOpen, ChunkOpen{ID: 1, Path: "x", Length: 10})
	w.WriteJSON(TypeResult, Results{Results: []Result{{Unit: 1, OK: true}}})
	w.WriteJSON(TypeProbeRequest, ProbeRequest{Streams: 2, BufferBytes: 1 << 20, Seconds: 5, Settle: true})
	w.WriteJSON(TypeProbeResult, ProbeResult{Seconds: 1.5, Settled: true})
	f.Add(seed.Bytes())
	f.Add([]byte{0x41, 0, 0, 0, 0, 0, 0, 36, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		r := NewReader(bytes.NewReader(in))
		for i := 0; i < 64; i++ {
			h, meta, err := r.Next()
			if err != nil {
				return
			}
			if cap(r.meta) > MaxMeta {
				t.Fatalf("meta buffer of %d bytes", cap(r.meta))
			}
			switch h.Type {
			case TypeFile:
				if m, err := ParseFileMeta(meta); err == nil && (len(m.Path) > MaxPath || len(m.Digest) > MaxDigest) {
					t.Fatalf("accepted oversized file meta")
				}
			case TypeBlock:
				ParseBlockMeta(meta)
			case TypeMem:
				ParseMemMeta(meta)
			case TypeChunkOpen:
				var m ChunkOpen
				DecodeJSON(meta, &m)
			case TypeResult:
				var m Results
				DecodeJSON(meta, &m)
			case TypeSummary:
				var m Summary
				DecodeJSON(meta, &m)
			case TypeProbeRequest:
				var m ProbeRequest
				DecodeJSON(meta, &m)
			case TypeProbeResult:
				var m ProbeResult
				DecodeJSON(meta, &m)
			}
			if h.DataLen > 0 {
				// Read into a buffer sized by the checked length, as the agents do.
				if h.DataLen > MaxData {
					t.Fatalf("data length %d passed the check", h.DataLen)
				}
				if err := r.Discard(); err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
					return
				}
			}
		}
	})
}

func TestHeaderEncoding(t *testing.T) {
	b := make([]byte, HeaderSize)
	PutHeader(b, Header{Type: TypeBlock, MetaLen: blockMetaSize, DataLen: 7})
	if b[0] != byte(TypeBlock) || binary.BigEndian.Uint32(b[8:]) != 7 {
		t.Fatalf("header bytes %v", b)
	}
}
