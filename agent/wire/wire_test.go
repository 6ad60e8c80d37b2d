package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
)

// pair is a writer and a reader of one direction of a connection, as the handshake
// would key them.
func pair(w io.Writer, r io.Reader) (*Writer, *Reader) {
	key := bytes.Repeat([]byte{7}, 32)
	return newWriter(w, newFrameMAC(key)), newReader(r, newFrameMAC(key))
}

func TestRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w, r := pair(&buf, &buf)
	data := bytes.Repeat([]byte("x"), 100<<10)
	fm, err := FileMeta{Unit: 9, Size: uint64(len(data)), Mode: 0o640, MtimeNs: 123, Flags: FileVerify, Digest: []byte{1, 2, 3}, Path: "a/b.dat"}.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFrame(TypeFile, fm, data); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteJSON(TypeChunkEnd, ChunkEnd{ID: 4, Blocks: 2}); err != nil {
		t.Fatal(err)
	}
	h, meta, err := r.Next()
	if err != nil || h.Type != TypeFile {
		t.Fatalf("first frame: %+v %v", h, err)
	}
	m, err := ParseFileMeta(meta)
	if err != nil || m.Path != "a/b.dat" || m.Unit != 9 || !bytes.Equal(m.Digest, []byte{1, 2, 3}) {
		t.Fatalf("file meta %+v %v", m, err)
	}
	got := make([]byte, h.DataLen)
	if err := r.ReadData(got); err != nil || !bytes.Equal(got, data) {
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
			_, r := pair(nil, bytes.NewReader(b))
			if _, _, err := r.Next(); !errors.Is(err, ErrFrame) {
				t.Fatalf("Next() = %v, want ErrFrame", err)
			}
		})
	}
}

// sampleStream is a connection's worth of frames of every kind.
func sampleStream(t testing.TB) []byte {
	var buf bytes.Buffer
	w, _ := pair(&buf, nil)
	w.WriteJSON(TypeHello, Hello{Role: RoleData, Session: 5})
	empty, _ := FileMeta{Unit: 2, Path: "empty"}.Append(nil)
	w.WriteFrame(TypeFile, empty, nil)
	fm, _ := FileMeta{Unit: 1, Size: 3, Path: "file0.txt"}.Append(nil)
	w.WriteFrame(TypeFile, fm, []byte("abc"))
	w.WriteFrame(TypeBlock, BlockMeta{Chunk: 1, Offset: 1 << 20}.Put(make([]byte, 32)), bytes.Repeat([]byte("z"), 40<<10))
	w.WriteJSON(TypeChunkOpen, ChunkOpen{ID: 1, Path: "x", Length: 10})
	w.WriteJSON(TypeResult, Results{Results: []Result{{Unit: 1, OK: true}}})
	w.WriteFrame(TypeMem, MemMeta{}.Put(make([]byte, 4)), []byte("tagged"))
	w.WriteFrameFlags(TypeMem, FlagDataOutsideTag, MemMeta{}.Put(make([]byte, 4)), []byte("generated"))
	return buf.Bytes()
}

// readAll reads every frame of a stream, data included, and returns them re-encoded
// as (type, meta, data) triples, or the first error.
func readAll(in []byte) ([][3][]byte, error) {
	_, r := pair(nil, bytes.NewReader(in))
	var out [][3][]byte
	for {
		h, meta, err := r.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		data := make([]byte, h.DataLen)
		if h.Type >= TypeBlock { // bulk frames are read as the agents read them, empty or not
			if err := r.ReadData(data); err != nil {
				return out, err
			}
		}
		out = append(out, [3][]byte{{byte(h.Type)}, append([]byte(nil), meta...), data})
	}
}

// TestEveryBitFlipIsCaught flips each bit of a stream of frames in turn — headers,
// meta, data and tags — and checks that the reader never hands out a frame that
// differs from what was sent: it fails, on the flipped frame or before.
func TestEveryBitFlipIsCaught(t *testing.T) {
	orig := sampleStream(t)
	want, err := readAll(orig)
	if err != nil || len(want) != 8 {
		t.Fatalf("clean stream: %d frames, %v", len(want), err)
	}
	for bit := 0; bit < len(orig)*8; bit++ {
		if bit > 4096*8 && bit%97 != 0 {
			continue // the bulk of the 40 KiB block: a sample of its bits
		}
		in := append([]byte(nil), orig...)
		in[bit/8] ^= 1 << (bit % 8)
		got, err := readAll(in)
		for i := range got {
			if !bytes.Equal(got[i][0], want[i][0]) || !bytes.Equal(got[i][1], want[i][1]) {
				// The last Mem frame's data is outside its tag by design; nothing else may differ.
				t.Fatalf("bit %d: frame %d came out altered", bit, i)
			}
			if i != len(want)-1 && !bytes.Equal(got[i][2], want[i][2]) {
				t.Fatalf("bit %d: frame %d's data came out altered", bit, i)
			}
		}
		// The stream ends with the Mem frame: its 9 bytes of data, then its tag.
		inMemData := bit/8 >= len(orig)-TagSize-9 && bit/8 < len(orig)-TagSize
		if err == nil && !inMemData {
			t.Fatalf("bit %d: the stream was read without an error", bit)
		}
	}
}

// TestDroppedReorderedAndReplayedFramesAreCaught: frames are numbered, so a frame cut
// out, two frames swapped, or a frame sent twice fails the next check.
func TestDroppedReorderedAndReplayedFramesAreCaught(t *testing.T) {
	var frames [][]byte
	for i := range 3 {
		var buf bytes.Buffer
		w, _ := pair(&buf, nil)
		// each writer starts at frame 0: write i frames first so this one is frame i
		for range i {
			w.WriteJSON(TypeStats, PeerStats{})
		}
		buf.Reset()
		w.WriteJSON(TypeWorkRequest, WorkRequest{N: int32(i + 1)})
		frames = append(frames, append([]byte(nil), buf.Bytes()...))
	}
	cat := func(idx ...int) []byte {
		var b []byte
		for _, i := range idx {
			b = append(b, frames[i]...)
		}
		return b
	}
	if got, err := readAll(cat(0, 1, 2)); err != nil || len(got) != 3 {
		t.Fatalf("in order: %d frames, %v", len(got), err)
	}
	for name, order := range map[string][]int{"dropped": {0, 2}, "reordered": {0, 2, 1}, "replayed": {0, 1, 1, 2}, "first dropped": {1, 2}} {
		if _, err := readAll(cat(order...)); !errors.Is(err, ErrAuth) {
			t.Errorf("%s: %v, want ErrAuth", name, err)
		}
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
	w, r := pair(&buf, &buf)
	want := ProbeRequest{Streams: 4, Seconds: 5, Settle: true}
	w.WriteJSON(TypeProbeRequest, want)
	h, meta, err := r.Next()
	var got ProbeRequest
	if err != nil || h.Type != TypeProbeRequest || DecodeJSON(meta, &got) != nil || got != want {
		t.Errorf("round trip: %+v (%v), want %+v", got, err, want)
	}
}

// FuzzReader feeds arbitrary bytes to the decoder: it must never panic, never hold a
// meta buffer larger than the limits allow, and never accept a frame it was not sent
// (the key is the test's; the fuzzer does not know it, so any frame that passes must
// be one of the seed's, unchanged).
func FuzzReader(f *testing.F) {
	seed := sampleStream(f)
	want, _ := readAll(seed)
	f.Add(seed)
	f.Add([]byte{0x41, 0, 0, 0, 0, 0, 0, 36, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		_, r := pair(nil, bytes.NewReader(in))
		for i := 0; i < 64; i++ {
			h, meta, err := r.Next()
			if err != nil {
				return
			}
			if cap(r.meta) > MaxMeta {
				t.Fatalf("meta buffer of %d bytes", cap(r.meta))
			}
			if h.DataLen > MaxData {
				t.Fatalf("data length %d passed the check", h.DataLen)
			}
			data := make([]byte, h.DataLen)
			if h.DataLen > 0 && r.ReadData(data) != nil {
				return
			}
			if i >= len(want) || h.Type != Type(want[i][0][0]) || !bytes.Equal(meta, want[i][1]) ||
				(i != len(want)-1 && !bytes.Equal(data, want[i][2])) {
				t.Fatalf("frame %d (type %d) accepted but never sent", i, h.Type)
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

// TestEncryptedFrames: with encryption on, every frame's meta and data arrive in the
// clear at the reader, none of their bytes appear on the wire, and a flipped bit is
// caught as in any other frame.
func TestEncryptedFrames(t *testing.T) {
	keys := Keys{MAC: bytes.Repeat([]byte{7}, 32), Enc: bytes.Repeat([]byte{9}, 32)}
	var buf bytes.Buffer
	w, r := newWriter(&buf, newFrameSealer(keys)), newReader(&buf, newFrameSealer(keys))
	if err := w.SetEncrypt(true); err != nil {
		t.Fatal(err)
	}
	secretPath := "projects/very-secret-name.dat"
	data := bytes.Repeat([]byte("confidential payload "), 3000)
	fm, _ := FileMeta{Unit: 3, Size: uint64(len(data)), Path: secretPath}.Append(nil)
	w.WriteFrame(TypeFile, fm, data)
	w.WriteJSON(TypeChunkOpen, ChunkOpen{ID: 1, Path: "another/secret", Length: 10})
	wireBytes := append([]byte(nil), buf.Bytes()...)
	for _, clear := range [][]byte{[]byte(secretPath), []byte("another/secret"), []byte("confidential payload")} {
		if bytes.Contains(wireBytes, clear) {
			t.Fatalf("%q travels in the clear", clear)
		}
	}
	h, meta, err := r.Next()
	if err != nil || h.Type != TypeFile || h.Flags&FlagEncrypted == 0 {
		t.Fatalf("first frame: %+v %v", h, err)
	}
	m, err := ParseFileMeta(meta)
	if err != nil || m.Path != secretPath {
		t.Fatalf("meta: %+v %v", m, err)
	}
	got := make([]byte, h.DataLen)
	if err := r.ReadData(got); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("data: %v", err)
	}
	h, meta, err = r.Next()
	var co ChunkOpen
	if err != nil || DecodeJSON(meta, &co) != nil || co.Path != "another/secret" {
		t.Fatalf("control frame: %+v %v %+v", h, err, co)
	}
	for bit := 0; bit < len(wireBytes)*8; bit += 61 {
		in := append([]byte(nil), wireBytes...)
		in[bit/8] ^= 1 << (bit % 8)
		r := newReader(bytes.NewReader(in), newFrameSealer(keys))
		_, err := func() (int, error) {
			for i := 0; ; i++ {
				h, _, err := r.Next()
				if err != nil {
					return i, err
				}
				if h.DataLen > 0 {
					if err := r.ReadData(make([]byte, h.DataLen)); err != nil {
						return i, err
					}
				}
			}
		}()
		if err == io.EOF {
			t.Fatalf("bit %d flipped in an encrypted stream went unnoticed", bit)
		}
	}
	if err := newWriter(io.Discard, newFrameMAC(keys.MAC)).SetEncrypt(true); err == nil {
		t.Error("a writer without an encryption key agreed to encrypt")
	}
}

// frame is one frame of TestFixedFramesAreTheSameFrames' sequence.
type frame struct {
	data  []byte
	fixed bool
	flags Flags
}

// TestFixedFramesAreTheSameFrames: frames written with WriteFixedFrame (their data's
// hash taken once per slice) are byte for byte the frames WriteFrameFlags writes, in
// every order of two fixed blocks, a shorter slice of one (a run's last frame), other
// frames between them and frames with data outside the tag, whether the tag is taken
// with the wide GHASH or the standard library's GCM; a reader checks them all.
func TestFixedFramesAreTheSameFrames(t *testing.T) {
	a, b := bytes.Repeat([]byte{0xa5}, 200<<10), make([]byte, 64<<10+7)
	for i := range b {
		b[i] = byte(i * 31)
	}
	seq := []frame{{a, true, 0}, {a, true, 0}, {b, true, 0}, {a, true, 0}, {a[:1000], true, 0}, {a[:1000], true, 0},
		{b, false, 0}, {a, true, FlagDataOutsideTag}, {a, true, 0}, {nil, true, 0}, {b[5:], true, 0}, {b, true, 0}}
	for _, narrow := range []bool{false, true} {
		var plain, fixed bytes.Buffer
		wp, _ := pair(&plain, nil)
		wf, r := pair(&fixed, &fixed)
		if narrow {
			wf.mac.wide = nil
		}
		for _, f := range seq {
			meta := MemMeta{}.Put(make([]byte, 16))
			if err := wp.WriteFrameFlags(TypeMem, f.flags, meta, f.data); err != nil {
				t.Fatal(err)
			}
			write := wf.WriteFrameFlags
			if f.fixed {
				write = wf.WriteFixedFrame
			}
			if err := write(TypeMem, f.flags, meta, f.data); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(plain.Bytes(), fixed.Bytes()) {
			t.Fatalf("narrow %v: fixed frames differ from the same frames written plainly", narrow)
		}
		for i, f := range seq {
			h, meta, err := r.Next()
			if _, perr := ParseMemMeta(meta); err != nil || perr != nil || int(h.DataLen) != len(f.data) {
				t.Fatalf("narrow %v: frame %d: %+v %v", narrow, i, h, err)
			}
			got := make([]byte, h.DataLen)
			if err := r.ReadData(got); err != nil || !bytes.Equal(got, f.data) {
				t.Fatalf("narrow %v: frame %d's data: %v", narrow, i, err)
			}
		}
	}
}
