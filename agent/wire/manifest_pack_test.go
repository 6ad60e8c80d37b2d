package wire

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/dtnflow/dtnflow/agent/fsname"
)

// hostileManifest is a manifest no friendly test would write: names that are not
// UTF-8, with newlines, sharing long prefixes, differing in their last byte only;
// sizes and mtimes at the ends of their ranges; files of many chunks, some of whose
// digests are unknown; problems whose text is not UTF-8.
func hostileManifest() []ManifestFile {
	long := strings.Repeat("deep/", 800) + "name"
	return []ManifestFile{
		{Path: "plain.bin", Size: 65536, MtimeNs: 1764350000123456789, Digest: strings.Repeat("ab", 32), ThisRun: true},
		{Path: "bad\xff\xfename", Size: 0, MtimeNs: -1},
		{Path: "new\nline", Size: math.MaxInt64, MtimeNs: math.MinInt64},
		{Path: fsname.Path(long + "a"), Size: 1},
		{Path: fsname.Path(long + "b"), Size: 1, Chunks: []string{"", strings.Repeat("cd", 32), ""}},
		{Path: "", Problem: "missing at its final name: bad\xff\xfename"},
		{Path: "chunks", Chunks: make([]string, 300), ThisRun: true},
	}
}

// manyFiles is a receiver's manifest after 20 000 small files.
func manyFiles(n int) []ManifestFile {
	files := make([]ManifestFile, n)
	for i := range files {
		files[i] = ManifestFile{Path: fsname.Path(fmt.Sprintf("small/d%03d/f%06d.bin", i/1000, i)), Size: 65536,
			MtimeNs: 1764350000000000000 + int64(i)*7919, ThisRun: true}
	}
	return files
}

func TestPackManifestFilesRoundTrip(t *testing.T) {
	for name, files := range map[string][]ManifestFile{
		"hostile": hostileManifest(),
		"many":    manyFiles(20000),
		"one":     {{Path: "x"}},
	} {
		packed, err := PackManifestFiles(files)
		if err != nil {
			t.Fatal(err)
		}
		got, err := UnpackManifestFiles(packed)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := append([]ManifestFile(nil), files...)
		for i := range want {
			// the one change: a problem's text is made valid UTF-8, as JSON would have
			want[i].Problem = strings.ToValidUTF8(want[i].Problem, "\uFFFD")
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: round trip changed the files", name)
			for i := range min(len(got), len(want)) {
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Errorf("file %d: got %q, want %q", i, fmt.Sprint(got[i]), fmt.Sprint(want[i]))
				}
			}
		}
	}
}

// TestPackedManifestIsSmall: what the packed form is for. The JSON of 10 000 small
// files (a receiver's part) is about 740 kB; packed it must be under a fifth of it.
func TestPackedManifestIsSmall(t *testing.T) {
	files := manyFiles(10000)
	plain, err := json.Marshal(Manifest{Files: files})
	if err != nil {
		t.Fatal(err)
	}
	packed, err := PackManifestFiles(files)
	if err != nil {
		t.Fatal(err)
	}
	asMeta, _ := json.Marshal(Manifest{Packed: packed}) // base64 in the frame's meta
	t.Logf("JSON %d bytes, packed %d, packed in its meta %d", len(plain), len(packed), len(asMeta))
	if len(asMeta)*5 > len(plain) {
		t.Errorf("packed manifest meta of %d bytes for %d of JSON: want under a fifth", len(asMeta), len(plain))
	}
}

// deflated compresses raw as PackManifestFiles does, for hand-made packed forms.
func deflated(t testing.TB, raw []byte) []byte {
	var b bytes.Buffer
	zw, _ := flate.NewWriter(&b, flate.BestSpeed)
	zw.Write(raw)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// rawOf inflates a packed form.
func rawOf(t testing.TB, packed []byte) []byte {
	var b bytes.Buffer
	if _, err := b.ReadFrom(flate.NewReader(bytes.NewReader(packed))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestUnpackManifestFilesRefuses(t *testing.T) {
	good, err := PackManifestFiles(hostileManifest())
	if err != nil {
		t.Fatal(err)
	}
	raw := rawOf(t, good)
	cases := map[string][]byte{
		"not deflate data":      []byte("{\"files\":[]}"),
		"a byte after the last": deflated(t, append(append([]byte(nil), raw...), 0)),
		"a count that lies":     deflated(t, binary.AppendUvarint(nil, 1<<40)),
		"unknown flags":         deflated(t, append(appendString(binary.AppendUvarint(nil, 1), "p"), 0, 0, 0x80, 0, 0, 0)),
		"a chunk count that lies": deflated(t, binary.AppendUvarint(append(appendString(binary.AppendUvarint(nil, 1), "p"), 0, 0, 0, 0),
			1<<50)),
		// a deflate stream of zeros that inflates past the bound: refused, not allocated
		"a bomb": deflated(t, make([]byte, MaxPackedManifestBytes+1)),
	}
	// every cut of the inflated form short of its end
	for _, cut := range []int{0, 1, len(raw) / 3, len(raw) / 2, len(raw) - 1} {
		cases[fmt.Sprintf("cut at %d of %d", cut, len(raw))] = deflated(t, raw[:cut])
	}
	// the deflate stream itself cut short
	cases["deflate cut short"] = good[:len(good)/2]
	for name, packed := range cases {
		files, err := UnpackManifestFiles(packed)
		if err == nil {
			t.Errorf("%s: accepted, %d files", name, len(files))
			continue
		}
		if !errors.Is(err, ErrFrame) {
			t.Errorf("%s: %v, want an ErrFrame", name, err)
		}
	}
}

// FuzzUnpackManifestFiles: whatever a peer sends, unpacking neither panics nor accepts
// what packing the result does not give back.
func FuzzUnpackManifestFiles(f *testing.F) {
	good, _ := PackManifestFiles(hostileManifest())
	f.Add(good)
	f.Add(deflated(f, binary.AppendUvarint(nil, 3)))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, packed []byte) {
		files, err := UnpackManifestFiles(packed)
		if err != nil {
			return
		}
		again, err := PackManifestFiles(files)
		if err != nil {
			t.Fatal(err)
		}
		back, err := UnpackManifestFiles(again)
		if err != nil || !reflect.DeepEqual(back, files) {
			t.Fatalf("repacked files differ: %v", err)
		}
	})
}

func BenchmarkManifestPart(b *testing.B) {
	files := manyFiles(10000)
	b.Run("json", func(b *testing.B) {
		for b.Loop() {
			meta, _ := json.Marshal(Manifest{Files: files})
			var m Manifest
			if err := DecodeJSON(meta, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("packed", func(b *testing.B) {
		for b.Loop() {
			packed, _ := PackManifestFiles(files)
			meta, _ := json.Marshal(Manifest{Packed: packed})
			var m Manifest
			if err := DecodeJSON(meta, &m); err != nil {
				b.Fatal(err)
			}
			if _, err := UnpackManifestFiles(m.Packed); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestManifestPackAndUnpack: a part packs and unpacks in place; one that carries
// files both packed and in JSON is refused, whatever its packed bytes hold.
func TestManifestPackAndUnpack(t *testing.T) {
	m := Manifest{Files: hostileManifest()[:2], Last: true}
	if err := m.Pack(); err != nil || len(m.Files) != 0 || len(m.Packed) == 0 {
		t.Fatalf("Pack: %v, %d files left, %d packed bytes", err, len(m.Files), len(m.Packed))
	}
	both := m
	both.Files = hostileManifest()[:1]
	if err := both.Unpack(); !errors.Is(err, ErrFrame) {
		t.Errorf("a part with files packed and not: %v, want an ErrFrame", err)
	}
	if err := m.Unpack(); err != nil || len(m.Packed) != 0 || !reflect.DeepEqual(m.Files, hostileManifest()[:2]) {
		t.Errorf("Unpack: %v, files %v", err, m.Files)
	}
}
