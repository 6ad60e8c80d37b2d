package wan

import (
	"bufio"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
)

// DatasetSpec describes a dataset; the same spec always makes the same files.
type DatasetSpec struct {
	Kind DatasetKind `json:"kind"`
	// LargeBytes is the size of the one file of a Large dataset.
	LargeBytes int64 `json:"largeBytes,omitempty"`
	// MixedTotalBytes, MixedMinBytes and MixedMaxBytes shape a Mixed dataset: sizes
	// log-uniform in [min, max] until the total is reached.
	MixedTotalBytes int64 `json:"mixedTotalBytes,omitempty"`
	MixedMinBytes   int64 `json:"mixedMinBytes,omitempty"`
	MixedMaxBytes   int64 `json:"mixedMaxBytes,omitempty"`
	// SmallCount files of SmallBytes make a Small dataset, and with LargeCount files of
	// LargeBytes a SmallMix one.
	SmallCount int    `json:"smallCount,omitempty"`
	SmallBytes int64  `json:"smallBytes,omitempty"`
	LargeCount int    `json:"largeCount,omitempty"`
	Seed       uint64 `json:"seed"`
}

// DefaultDataset is the dataset of each kind: one 4 GiB file; a mix from
// 64 KiB to 1 GiB totalling 4 GiB; 20 000 files of 64 KiB.
func DefaultDataset(kind DatasetKind) DatasetSpec {
	switch kind {
	case Mixed:
		return DatasetSpec{Kind: Mixed, MixedTotalBytes: 4 << 30, MixedMinBytes: 64 << 10, MixedMaxBytes: 1 << 30, Seed: 1}
	case Small:
		return DatasetSpec{Kind: Small, SmallCount: 20000, SmallBytes: 64 << 10, Seed: 1}
	case SmallMix:
		return DatasetSpec{Kind: SmallMix, SmallCount: 20000, SmallBytes: 64 << 10, LargeCount: 3, LargeBytes: 300 << 20, Seed: 1}
	}
	return DatasetSpec{Kind: Large, LargeBytes: 4 << 30, Seed: 1}
}

// Sizes are the dataset's file sizes, in file order.
func (d DatasetSpec) Sizes() ([]int64, error) {
	switch d.Kind {
	case Large:
		if d.LargeBytes <= 0 {
			return nil, fmt.Errorf("dataset large: size %d", d.LargeBytes)
		}
		return []int64{d.LargeBytes}, nil
	case Small:
		if d.SmallCount <= 0 || d.SmallBytes <= 0 {
			return nil, fmt.Errorf("dataset small: %d files of %d bytes", d.SmallCount, d.SmallBytes)
		}
		s := make([]int64, d.SmallCount)
		for i := range s {
			s[i] = d.SmallBytes
		}
		return s, nil
	case SmallMix:
		if d.SmallCount <= 0 || d.SmallBytes <= 0 || d.LargeCount <= 0 || d.LargeBytes <= 0 {
			return nil, fmt.Errorf("dataset smallmix: %d files of %d bytes and %d of %d", d.SmallCount, d.SmallBytes, d.LargeCount, d.LargeBytes)
		}
		s := make([]int64, 0, d.SmallCount+d.LargeCount)
		for range d.SmallCount {
			s = append(s, d.SmallBytes)
		}
		for range d.LargeCount {
			s = append(s, d.LargeBytes)
		}
		return s, nil
	case Mixed:
		lo, hi := float64(d.MixedMinBytes), float64(d.MixedMaxBytes)
		if lo <= 0 || hi < lo || d.MixedTotalBytes < d.MixedMinBytes {
			return nil, fmt.Errorf("dataset mixed: sizes [%d, %d], total %d", d.MixedMinBytes, d.MixedMaxBytes, d.MixedTotalBytes)
		}
		rng := rand.New(rand.NewPCG(d.Seed, 0x6d69786564))
		var s []int64
		left := d.MixedTotalBytes
		for left > 0 {
			v := int64(math.Exp(math.Log(lo) + rng.Float64()*(math.Log(hi)-math.Log(lo))))
			v = min(max(v, d.MixedMinBytes), left)
			s = append(s, v)
			left -= v
		}
		return s, nil
	}
	return nil, fmt.Errorf("dataset kind %q: want large, mixed or small", d.Kind)
}

// Sample is a smaller dataset of the same kind, about bytes large, for probing a
// configuration: the large file cut to bytes, every k-th file of a mix (so the mix of
// sizes is kept), or the first files of many small ones.
func (d DatasetSpec) Sample(bytes int64) DatasetSpec {
	s := d
	switch d.Kind {
	case Large:
		s.LargeBytes = min(d.LargeBytes, bytes)
	case Small:
		s.SmallCount = int(max(1, min(int64(d.SmallCount), bytes/d.SmallBytes)))
	case Mixed:
		s.MixedTotalBytes = min(d.MixedTotalBytes, bytes)
	case SmallMix:
		// both parts scaled alike, so that the mix of sizes is kept
		total := int64(d.SmallCount)*d.SmallBytes + int64(d.LargeCount)*d.LargeBytes
		if f := float64(bytes) / float64(max(total, 1)); f < 1 {
			s.SmallCount = max(1, int(float64(d.SmallCount)*f))
			s.LargeBytes = max(d.SmallBytes, int64(float64(d.LargeBytes)*f))
		}
	}
	return s
}

// Dataset is a dataset on disk: Root holds the files (world-readable, so that an
// anonymous GridFTP server can serve them); Sizes lists them.
type Dataset struct {
	Spec  DatasetSpec `json:"spec"`
	Root  string      `json:"root"`
	Files []string    `json:"files"` // relative to Root
	Sizes []int64     `json:"sizes"`
	Total int64       `json:"totalBytes"`
}

// Count is the number of files.
func (d *Dataset) Count() int { return len(d.Files) }

// AverageBytes is the mean file size.
func (d *Dataset) AverageBytes() int64 { return d.Total / int64(max(1, len(d.Files))) }

// Generate writes spec's files under dir (which it creates, world-readable) with
// pseudo-random content that neither compresses nor deduplicates.
func Generate(spec DatasetSpec, dir string) (*Dataset, error) {
	sizes, err := spec.Sizes()
	if err != nil {
		return nil, err
	}
	if spec.Kind == Mixed || spec.Kind == SmallMix {
		// Large files first is how a crawl of a real tree rarely looks; shuffle once,
		// deterministically.
		rng := rand.New(rand.NewPCG(spec.Seed, 2))
		rng.Shuffle(len(sizes), func(i, j int) { sizes[i], sizes[j] = sizes[j], sizes[i] })
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	_ = os.Chmod(dir, 0o755)
	ds := &Dataset{Spec: spec, Root: dir}
	rng := rand.NewChaCha8([32]byte{byte(spec.Seed), 100, 116, 110})
	buf := make([]byte, 4<<20)
	for i, size := range sizes {
		var name string
		if spec.Kind == Large {
			name = "large.bin"
		} else {
			// 1000 files per directory, as trees of instrument data tend to be.
			name = filepath.Join(fmt.Sprintf("d%03d", i/1000), fmt.Sprintf("f%06d.bin", i))
		}
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		if err := writeRandom(path, size, rng, buf); err != nil {
			return nil, err
		}
		ds.Files = append(ds.Files, name)
		ds.Sizes = append(ds.Sizes, size)
		ds.Total += size
	}
	return ds, nil
}

func writeRandom(path string, size int64, rng *rand.ChaCha8, buf []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for left := size; left > 0; {
		n := min(int64(len(buf)), left)
		_, _ = rng.Read(buf[:n])
		if _, err := w.Write(buf[:n]); err != nil {
			f.Close()
			return err
		}
		left -= n
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// SizeHistogram summarises the sizes (for the report): count and bytes per power of 4.
func (d *Dataset) SizeHistogram() string {
	type bucket struct {
		lo    int64
		count int
		bytes int64
	}
	m := map[int64]*bucket{}
	for _, s := range d.Sizes {
		lo := int64(1)
		for lo*4 <= s {
			lo *= 4
		}
		if m[lo] == nil {
			m[lo] = &bucket{lo: lo}
		}
		m[lo].count++
		m[lo].bytes += s
	}
	var bs []*bucket
	for _, b := range m {
		bs = append(bs, b)
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].lo < bs[j].lo })
	s := ""
	for _, b := range bs {
		s += fmt.Sprintf("≥%s: %d files, %s; ", humanBytes(b.lo), b.count, humanBytes(b.bytes))
	}
	return s
}

func humanBytes(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}
