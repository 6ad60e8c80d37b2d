// Package coord is a job's coordinator: it lists the source, hands units of work out
// to the stripes that ask (a stripe that joins pulls work; the leases of a stripe that
// leaves or dies go back to the others), follows the controller's directives and
// reports. It keeps no state of its own: what is done comes from the receivers'
// journals (a Summary) each time it starts.
package coord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/bits"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/agent/fsname"
	"github.com/dtnflow/dtnflow/agent/fsroot"
	"github.com/dtnflow/dtnflow/agent/metrics"
	"github.com/dtnflow/dtnflow/agent/mover"
	"github.com/dtnflow/dtnflow/agent/wire"
	"github.com/dtnflow/dtnflow/optimizer"
)

// Options describe a job.
type Options struct {
	Root     *os.Root
	Paths    []string
	DestPath string
	Job      string
	Checksum string
	Verify   bool
	// VerifyMode is wire.VerifyReadBack (default) or wire.VerifyOnArrival.
	VerifyMode string
	Overwrite  string
	BlockSize  int64
	ChunkSize  int64
	// Log receives the job's events; nil discards them.
	Log *slog.Logger
	// Run names this run of the job (default: random); the receivers record it with
	// the files they make final, for the final check (manifest.go).
	Run string
	// InFlight is wire.InFlightAuthenticated (default) or wire.InFlightChecksum.
	InFlight string
	// NoChannelMoves keeps the plan's channels per size class for the whole job: the
	// scheduler's online moves are off (to measure what they bring).
	NoChannelMoves bool
	// SourceErrors is what a file that fails at its source does to the job:
	// contract.SourceErrorsFail (default, also "") fails it; contract.SourceErrorsSkip
	// skips the file, lists it, and ends the job PartiallyComplete instead of Complete.
	SourceErrors string
}

// Params are the tunable parameters (from flags or a directive).
type Params struct {
	Streams          int32
	BufferBytes      int64
	Concurrency      int32
	Pipelining       int32
	SizeClasses      []contract.SizeClassParam
	MaxBitsPerSecond int64
	// Scheduler is how the size classes share the channels (contract.Directive).
	Scheduler string
	// SampleStripes, when > 1, has the probe stripe run that many stripes for a probe
	// sample (wire.JobConfig.SampleStripes).
	SampleStripes int32
}

type cfile struct {
	f          fsroot.File
	dest       string
	chunks     int32
	chunksDone map[int32]bool
	done       bool
	failed     bool
	// skipped: the file failed at its source and the job skips it (SourceErrors Skip).
	skipped    bool
	class      string
	finalizing bool
	// digest and chunkDigests are the source digests the senders computed this run
	// (hex), for the final check.
	digest       string
	chunkDigests map[int32]string
}

type cunit struct {
	u      wire.Unit
	file   *cfile
	leased *Member
	done   bool
}

// Core is the coordinator's state.
type Core struct {
	opts Options
	log  *slog.Logger

	mu      sync.Mutex
	changed chan struct{}
	cfg     wire.JobConfig
	params  Params
	members map[*Member]bool

	phase      contract.Phase
	generation int64
	errMsg     string
	errCount   int
	fatal      bool
	// failedFiles are the first contract.MaxFailedFiles files that failed, with why,
	// for the job's status (the error message names only the first).
	failedFiles []contract.FailedFile
	// rejected counts the files the final check found wrong at the destination.
	rejected int64
	// skippedFiles are the first contract.MaxFailedFiles files skipped at the source,
	// with why; filesSkipped counts them all.
	skippedFiles []contract.FailedFile
	filesSkipped int64
	// notMoved are the first contract.MaxFailedFiles entries the listing found that
	// are not files it moves (Report.NotMoved), with why; entriesNotMoved counts
	// them all, each once however many source paths reach it.
	notMoved        []contract.FailedFile
	entriesNotMoved int64

	files  []*cfile
	byDest map[string]*cfile
	units  map[uint64]*cunit
	// pending are the units waiting for a stripe, in the order they are handed out;
	// pendingByClass counts them per size class (the lease limits ask it on every
	// request: counting the slice each time made a job of 20 000 small files cost its
	// coordinator O(files²)).
	pending        []*cunit
	pendingByClass map[string]int
	nextID         uint64
	built          bool

	// manifest is the union of the receivers' manifests while the final check runs
	// (nil before it), answered the stripes that have sent theirs, debris the
	// temporary files they removed.
	manifest map[manifestKey]wire.ManifestFile
	answered map[*Member]bool
	debris   int64

	filesDone, filesFailed, bytesDone int64
	// neededAtBuild is what the job had left to send when the receivers' journals
	// were read: what a run with nothing lost would send.
	neededAtBuild int64
	dataset       contract.Dataset
	samples       []contract.Sample
	// probe is where a probe on the job's own data is (contract.Report.Probe).
	probe contract.Phase
	// firstByte is when the first unit went to a stripe (contract.Report.FirstByteTime).
	firstByte  time.Time
	stats      map[int32]wire.StripeStats
	startBytes int64
	startTime  time.Time

	// ch is the size classes' channels at run time (channels.go; nil without classes),
	// classDone each class's bytes done this run, moves and recentMoves the channel
	// moves made.
	ch          *channels
	classDone   map[string]int64
	moves       int64
	recentMoves []contract.ChannelMove
}

// New lists the source paths and returns a Core in phase Starting. Paths are checked
// to stay under the root; the first one that does not is the error.
func New(o Options, p Params) (*Core, error) {
	if o.BlockSize <= 0 {
		o.BlockSize = mover.DefaultBlockSize
	}
	if o.ChunkSize <= 0 {
		o.ChunkSize = mover.DefaultChunkSize
	}
	if o.ChunkSize < o.BlockSize {
		o.ChunkSize = o.BlockSize
	}
	if o.Run == "" {
		o.Run = newRunID()
	}
	switch strings.ToLower(o.VerifyMode) {
	case "", "readback":
		o.VerifyMode = wire.VerifyReadBack
	case "onarrival":
		o.VerifyMode = wire.VerifyOnArrival
	default:
		return nil, fmt.Errorf("--verify-mode %q: want ReadBack or OnArrival", o.VerifyMode)
	}
	switch strings.ToLower(o.InFlight) {
	case "", "authenticated":
		o.InFlight = wire.InFlightAuthenticated
	case "checksum":
		o.InFlight = wire.InFlightChecksum
	case "headersonly":
		o.InFlight = wire.InFlightHeadersOnly
	case "encrypted":
		o.InFlight = wire.InFlightEncrypted
	default:
		return nil, fmt.Errorf("--in-flight %q: want Authenticated, Checksum, HeadersOnly or Encrypted", o.InFlight)
	}
	o.ChunkSize = o.ChunkSize / o.BlockSize * o.BlockSize
	if o.DestPath != "" {
		d, err := fsroot.Clean(o.DestPath, true)
		if err != nil {
			return nil, fmt.Errorf("--dest-path: %w", err)
		}
		o.DestPath = d
	}
	if _, err := mover.NewDigest(o.Checksum); err != nil {
		return nil, err
	}
	switch strings.ToLower(o.SourceErrors) {
	case "", "fail":
		o.SourceErrors = contract.SourceErrorsFail
	case "skip":
		o.SourceErrors = contract.SourceErrorsSkip
	default:
		return nil, fmt.Errorf("--source-errors %q: want Fail or Skip", o.SourceErrors)
	}
	switch o.Overwrite {
	case "":
		o.Overwrite = "IfDifferent"
	case "Never", "IfDifferent", "Always":
	default:
		return nil, fmt.Errorf("--overwrite %q: want Never, IfDifferent or Always", o.Overwrite)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	c := &Core{opts: o, log: o.Log, changed: make(chan struct{}), members: map[*Member]bool{}, byDest: map[string]*cfile{},
		units: map[uint64]*cunit{}, pendingByClass: map[string]int{}, stats: map[int32]wire.StripeStats{}, classDone: map[string]int64{}, phase: contract.PhaseStarting}
	if len(o.Paths) == 0 {
		return nil, fmt.Errorf("no source paths given")
	}
	seen := map[string]bool{}
	for _, p := range o.Paths {
		err := fsroot.Walk(o.Root, p, func(f fsroot.File) error {
			if seen[f.Path] {
				return nil
			}
			seen[f.Path] = true
			dest := f.Path
			if o.DestPath != "" && o.DestPath != "." {
				dest = path.Join(o.DestPath, f.Path)
			}
			if len(dest) > wire.MaxPath {
				// Said now, naming the file, rather than by the frame it could not be
				// sent in (small files) or not at all (chunks, whose paths os.Root
				// resolves one name at a time).
				return c.refuseAtListing(f.Path, f.Size, fmt.Errorf("its destination path is %d bytes long, and a path may be at most %d (the kernel's PATH_MAX)", len(dest), wire.MaxPath))
			}
			cf := &cfile{f: f, dest: dest, chunksDone: map[int32]bool{}, chunkDigests: map[int32]string{}}
			if f.Size > o.BlockSize {
				cf.chunks = int32((f.Size + o.ChunkSize - 1) / o.ChunkSize)
			}
			c.files = append(c.files, cf)
			c.byDest[dest] = cf
			c.dataset.Files++
			c.dataset.Bytes += f.Size
			return nil
		}, func(p, why string) {
			if !seen[p] {
				seen[p] = true
				c.listNotMoved(p, why)
			}
		},
			// a directory it cannot list, an entry it cannot look at: nothing under it is
			// known, so it counts as one entry
			func(p string, err error) error { return c.refuseAtListing(p, 0, fmt.Errorf("cannot be read: %w", err)) })
		if err != nil {
			return nil, err
		}
	}
	if err := c.refuseTemporaryNames(); err != nil {
		return nil, err
	}
	c.dataset.Buckets = histogram(c.files)
	c.setParamsLocked(p)
	c.cfg.Mode = contract.ModeTransfer
	return c, nil
}

// refuseAtListing decides about a source entry the listing found and the job cannot
// move (size bytes of it; why says what is wrong): under SourceErrors=Fail the job is
// refused, naming it; under Skip it is counted, skipped and listed, and the job ends
// PartiallyComplete at best.
func (c *Core) refuseAtListing(p string, size int64, why error) error {
	if c.opts.SourceErrors != contract.SourceErrorsSkip {
		return fmt.Errorf("source %s refused: %w", fsname.Show(p), why)
	}
	c.dataset.Files++
	c.dataset.Bytes += size
	c.listSkippedLocked(p, why.Error())
	return nil
}

// refuseTemporaryNames finds the listed files whose destination name is the temporary
// name another listed file is written under until it is verified (mover.TempName: a
// hidden name ending in .dtnpart, fixed by the job's name and the file's). Both would
// be written through one file at the destination, and the final check would find one
// of them holding the other's bytes, at every run. Such a file — most likely the debris
// of an interrupted copy, copied on — is refused under Fail, naming it, and skipped and
// listed under Skip; a job of another name writes under other temporary names.
func (c *Core) refuseTemporaryNames() error {
	if !slices.ContainsFunc(c.files, func(f *cfile) bool { return mover.IsTempName(f.dest) }) {
		return nil // the usual dataset: no name of ours, nothing to compare
	}
	clash := map[*cfile]string{}
	for _, f := range c.files {
		tmp := mover.TempName(f.dest, c.opts.Job)
		if other := c.byDest[tmp]; other != nil && other != f {
			clash[other] = fmt.Sprintf("its destination name is the temporary name that %s is written under in job %q (give the job another name to move both)",
				fsname.Show(f.f.Path), c.opts.Job)
		}
	}
	if len(clash) == 0 {
		return nil
	}
	if c.opts.SourceErrors != contract.SourceErrorsSkip {
		for _, f := range c.files {
			if why, ok := clash[f]; ok {
				return fmt.Errorf("source %s refused: %s", fsname.Show(f.f.Path), why)
			}
		}
	}
	c.files = slices.DeleteFunc(c.files, func(f *cfile) bool {
		why, ok := clash[f]
		if ok {
			delete(c.byDest, f.dest)
			c.listSkippedLocked(f.f.Path, why)
		}
		return ok
	})
	return nil
}

func histogram(files []*cfile) []contract.SizeBucket {
	m := map[int32]*contract.SizeBucket{}
	for _, f := range files {
		var l int32
		if f.f.Size > 1 {
			l = int32(bits.Len64(uint64(f.f.Size - 1)))
		}
		b := m[l]
		if b == nil {
			b = &contract.SizeBucket{Log2: l}
			m[l] = b
		}
		b.Files++
		b.Bytes += f.f.Size
	}
	out := make([]contract.SizeBucket, 0, len(m))
	for _, b := range m {
		out = append(out, *b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Log2 < out[j].Log2 })
	return out
}

// ListDataset summarises the files at or under paths (relative to root).
func ListDataset(root *os.Root, paths []string) (contract.Dataset, error) {
	var files []*cfile
	seen := map[string]bool{}
	for _, p := range paths {
		err := fsroot.Walk(root, p, func(f fsroot.File) error {
			if !seen[f.Path] {
				seen[f.Path] = true
				files = append(files, &cfile{f: f})
			}
			return nil
		}, func(string, string) {}, func(string, error) error { return nil }) // a summary: what can be read
		if err != nil {
			return contract.Dataset{}, err
		}
	}
	ds := contract.Dataset{Buckets: histogram(files)}
	for _, f := range files {
		ds.Files++
		ds.Bytes += f.f.Size
	}
	return ds, nil
}

// Resent is how much of sent (this run's payload bytes) went beyond what the job had
// left when it started: data sent again after a failure. Blocks of a chunk that the
// journals held count as left to send, so this is a lower bound.
func (c *Core) Resent(sent int64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.built {
		return 0
	}
	return max(sent-c.neededAtBuild, 0)
}

// Dataset is the dataset's summary.
func (c *Core) Dataset() contract.Dataset { return c.dataset }

func (c *Core) setParamsLocked(p Params) {
	if p.Streams <= 0 {
		p.Streams = 4
	}
	if p.Concurrency <= 0 {
		p.Concurrency = optimizer.DefaultConcurrency
	}
	if p.Pipelining <= 0 {
		p.Pipelining = 16
	}
	for _, sc := range p.SizeClasses {
		p.Concurrency = max(p.Concurrency, sc.Concurrency)
		p.Pipelining = max(p.Pipelining, sc.Pipelining)
	}
	for _, f := range c.files {
		f.class = classOf(f.f.Size, p.SizeClasses)
	}
	p.Concurrency = max(p.Concurrency, c.chunkWorkersLocked())
	c.params = p
	c.cfg.Generation++
	c.cfg = wire.JobConfig{Generation: c.cfg.Generation, Job: c.opts.Job, Run: c.opts.Run, InFlight: c.opts.InFlight, Mode: c.cfg.Mode, Checksum: c.opts.Checksum, Verify: c.opts.Verify, VerifyMode: c.opts.VerifyMode,
		Overwrite: c.opts.Overwrite, Streams: p.Streams, BufferBytes: p.BufferBytes, Concurrency: p.Concurrency, Pipelining: p.Pipelining,
		BlockSize: c.opts.BlockSize, ChunkSize: c.opts.ChunkSize, SizeClasses: p.SizeClasses, SampleStripes: p.SampleStripes}
	for _, u := range c.units {
		u.u.Class = u.file.class
	}
	c.recountPendingLocked()
	c.setChannelsLocked(p)
	c.broadcastConfigLocked()
}

// chunkWorkersLocked is the fewest units a stripe works on at once (its workers,
// wire.JobConfig.Concurrency) so that the chunks of a file never wait on each other's
// opening: 2 when a class holds one file left to move, in several chunks; else 0 (no
// floor). A chunk opens with a round trip to its receiver (ChunkOpen, ChunkOpened with
// the blocks it already has) before its first block, and a stripe working one unit at
// a time leaves its streams idle for that round trip at every chunk. Algorithm 1's
// concurrency counts files, min(…, files, maxCC): a class of one file gets 1, and
// with it one worker a stripe. On issue 11's path (1 Gbit/s, 50 ms) one 4 GiB file at
// 4 streams took 40.5–41.4 s with one worker and 36.3–37.6 s with two or four
// (64 MiB chunks: a round trip in every 0.55 s). Two chunks of one file are still one
// file in flight (request counts a file's chunks as one slot under SC), so a class of
// several files keeps the concurrency it was given, the job's own cap included.
func (c *Core) chunkWorkersLocked() int32 {
	files, chunked := map[string]int{}, map[string]bool{}
	for _, f := range c.files {
		if f.done {
			continue
		}
		files[f.class]++
		if f.chunks > 1 {
			chunked[f.class] = true
		}
	}
	for class, n := range files {
		if n == 1 && chunked[class] {
			return 2
		}
	}
	return 0
}

func classOf(size int64, classes []contract.SizeClassParam) string {
	for _, sc := range classes {
		if sc.MaxBytes == 0 || size <= sc.MaxBytes {
			return sc.Class
		}
	}
	return ""
}

func (c *Core) broadcastConfigLocked() {
	n := int64(0)
	for m := range c.members {
		if m.stripe >= 0 {
			n++
		}
	}
	cfg := c.cfg
	if c.params.MaxBitsPerSecond > 0 {
		cfg.MaxBitsPerSecond = c.params.MaxBitsPerSecond / max(n, 1)
	}
	for m := range c.members {
		m.pushConfig(cfg)
	}
}

// Params are the current parameters.
func (c *Core) Params() Params {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.params
}

// SetParams replaces the parameters; stripes apply them without restarting.
func (c *Core) SetParams(p Params) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setParamsLocked(p)
	c.signalLocked()
}

func (c *Core) signalLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Changed returns a channel closed at the next change of state.
func (c *Core) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// SetPhase moves to a phase (Transferring, Paused, Probing, Probed).
func (c *Core) SetPhase(p contract.Phase) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.phase.Finished() {
		return
	}
	if p == contract.PhaseTransferring && c.startTime.IsZero() {
		c.startTime, c.startBytes = time.Now(), c.bytesDone
	}
	c.phase = p
	c.signalLocked()
}

// Phase is the current phase.
func (c *Core) Phase() contract.Phase {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.phase
}

// Err is the first error and how many there were.
func (c *Core) Err() (string, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.errMsg, c.errCount
}

// ---- summary and units ----

func (c *Core) needSummary() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.built
}

func (c *Core) summary(s wire.Summary) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.built {
		return
	}
	for _, d := range s.Files {
		if f := c.byDest[string(d.Path)]; f != nil && f.f.Size == d.Size && f.f.MtimeNs == d.MtimeNs && !f.done {
			f.done = true
			c.filesDone++
			c.bytesDone += f.f.Size
		}
	}
	for _, d := range s.Chunks {
		if f := c.byDest[string(d.Path)]; f != nil && f.f.Size == d.Size && f.f.MtimeNs == d.MtimeNs && d.ChunkSize == c.opts.ChunkSize && d.Index < f.chunks && !f.chunksDone[d.Index] {
			f.chunksDone[d.Index] = true
			c.bytesDone += chunkLen(f.f.Size, c.opts.ChunkSize, d.Index)
		}
	}
	if !s.Last {
		return
	}
	c.buildLocked()
}

func chunkLen(size, chunk int64, i int32) int64 {
	off := int64(i) * chunk
	return min(chunk, size-off)
}

// buildLocked turns what is not yet done into units: large files first (their chunks
// in order), then small files, so the long tails start early.
func (c *Core) buildLocked() {
	c.built = true
	c.neededAtBuild = c.dataset.Bytes - c.bytesDone
	order := make([]*cfile, 0, len(c.files))
	for _, f := range c.files {
		if !f.done {
			order = append(order, f)
		}
	}
	sort.SliceStable(order, func(i, j int) bool { return order[i].f.Size > order[j].f.Size && order[i].chunks > 0 })
	for _, f := range order {
		if f.chunks == 0 {
			c.addUnitLocked(f, wire.Unit{Kind: wire.UnitFile}, false)
			continue
		}
		all := true
		for i := int32(0); i < f.chunks; i++ {
			if f.chunksDone[i] {
				continue
			}
			all = false
			off := int64(i) * c.opts.ChunkSize
			c.addUnitLocked(f, wire.Unit{Kind: wire.UnitChunk, Index: i, Chunks: f.chunks, Offset: off, Length: chunkLen(f.f.Size, c.opts.ChunkSize, i)}, false)
		}
		if all {
			c.finalizeLocked(f)
		}
	}
	c.log.Info("Listed the dataset", "files", c.dataset.Files, "bytes", c.dataset.Bytes, "alreadyDone", c.filesDone, "units", len(c.pending))
	c.checkDoneLocked()
	c.signalLocked()
}

func (c *Core) addUnitLocked(f *cfile, u wire.Unit, front bool) {
	c.nextID++
	u.ID = c.nextID
	u.Source, u.Dest, u.Size, u.Mode, u.MtimeNs, u.Class = fsname.Path(f.f.Path), fsname.Path(f.dest), f.f.Size, uint32(f.f.Mode), f.f.MtimeNs, f.class
	cu := &cunit{u: u, file: f}
	c.units[u.ID] = cu
	if front {
		c.pendFrontLocked(cu)
	} else {
		c.pendBackLocked(cu)
	}
}

// pendBackLocked queues a unit after every other.
func (c *Core) pendBackLocked(u *cunit) {
	c.pending = append(c.pending, u)
	c.pendingByClass[u.u.Class]++
}

// pendFrontLocked queues units, in their order, before every other: units given back
// and finishing steps go first. (Rare: a retry, a stripe that left, a file's last
// step; the copy is not on the per-file path.)
func (c *Core) pendFrontLocked(us ...*cunit) {
	for _, u := range us {
		c.pendingByClass[u.u.Class]++
	}
	c.pending = append(us[:len(us):len(us)], c.pending...)
}

// recountPendingLocked counts the pending units per class again (their classes changed).
func (c *Core) recountPendingLocked() {
	clear(c.pendingByClass)
	for _, u := range c.pending {
		c.pendingByClass[u.u.Class]++
	}
}

// leaseLocked hands u to m; m.leases keeps what each stripe holds, so that its
// requests and its leaving look at its own units, not at every unit of the job.
func (c *Core) leaseLocked(u *cunit, m *Member) {
	u.leased = m
	m.leases[u] = struct{}{}
}

// unleaseLocked takes u back from the stripe that holds it, if any.
func (c *Core) unleaseLocked(u *cunit) {
	if u.leased != nil {
		delete(u.leased.leases, u)
		u.leased = nil
	}
}

// retireLocked ends u (done, failed or skipped): no stripe holds it any more and the
// job no longer counts it. A copy of it still in the queue is dropped when reached.
func (c *Core) retireLocked(u *cunit) {
	c.unleaseLocked(u)
	u.done = true
	delete(c.units, u.u.ID)
}

func (c *Core) finalizeLocked(f *cfile) {
	if f.finalizing || f.done {
		return
	}
	if f.chunks == 1 {
		// The chunk's receiver renames a one-chunk file itself; a verified chunk that
		// was not renamed is finished by sending the chunk again (the receiver
		// answers from its journal without data).
		f.finalizing = true
		c.addUnitLocked(f, wire.Unit{Kind: wire.UnitChunk, Index: 0, Chunks: 1, Length: f.f.Size}, true)
		return
	}
	f.finalizing = true
	c.addUnitLocked(f, wire.Unit{Kind: wire.UnitFinalize, Chunks: f.chunks}, true)
}

// request hands up to n units to m; ok false means wait.
func (c *Core) request(m *Member, n int) (wire.WorkGrant, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.phase.Finished() {
		return wire.WorkGrant{Finished: true}, true
	}
	if !c.built || c.phase != contract.PhaseTransferring {
		return wire.WorkGrant{}, false
	}
	if !c.members[m] {
		// m has left (its connection dropped; Leave already gave its leases back). A
		// request still being served for it, such as ServeConn's goroutine woken by
		// Leave's own signal, must not lease units to it: no Leave would ever return
		// them and the job would stall with them neither pending nor in flight.
		return wire.WorkGrant{}, false
	}
	if c.checkingLocked() {
		// Every file is done: what is left is the final check. A stripe that has
		// not sent its receiver's manifest is asked for it (again, if its session
		// broke while sending); the others wait for the verdict.
		if !c.answered[m] && m.stripe >= 0 {
			return wire.WorkGrant{Manifest: true, PackedManifest: true}, true
		}
		return wire.WorkGrant{}, false
	}
	var g wire.WorkGrant
	n = min(n, c.guidedShareLocked()-len(m.leases))
	// Under SC a class runs alone with Algorithm 1's parameters, whose concurrency
	// is files in flight: a file of several chunks takes one of its class's slots
	// however many of its chunks the stripe holds. (MC and ProMC count units: the
	// channels they move between classes bound what each class has on the wire.)
	filesBound := c.ch != nil && c.ch.sched == optimizer.SingleChunk
	perClass := map[string]int{}
	heldFiles := map[*cfile]bool{}
	chunks := 0
	for u := range m.leases {
		if u.u.Kind == wire.UnitChunk {
			chunks++
			if filesBound && heldFiles[u.file] {
				continue
			}
			heldFiles[u.file] = true
		}
		perClass[u.u.Class]++
	}
	limit := c.leaseLimitsLocked()
	// Chunks are leased at most chunkCap per stripe, whichever class they are in: a
	// stripe works on them in turn, and one that leased every chunk of a large file
	// would leave nothing for a stripe that joins later (a probe sample of several
	// stripes, a plan's new stripe). Two per file slot, and never fewer than for
	// optimizer.DefaultConcurrency slots: a chunk is verified only once its last
	// block lands, and a stripe held to the two chunks of one slot (a huge file's
	// concurrency of 1) waits, all its streams idle, for the slowest stream's last
	// block of the one before — with four competing flows on issue 11's path, 2 s
	// at 3 Mbit/s where the same streams at four slots never fell below 550 Mbit/s
	// (docs/benchmarks.md, twentieth session).
	chunkCap := 2 * int(max(c.params.Concurrency, optimizer.DefaultConcurrency))
	var kept []*cunit // looked at and left for later, in order
	i := 0
	for ; i < len(c.pending) && len(g.Units) < n && i <= 4*n+64; i++ {
		u := c.pending[i]
		if u.done {
			// given back by a stripe that left, then reported done by it after all:
			// nothing left to send, and a lease of it would never be returned
			c.pendingByClass[u.u.Class]--
			continue
		}
		l, bounded := limit[u.u.Class]
		isChunk := u.u.Kind == wire.UnitChunk
		newSlot := !isChunk || !filesBound || !heldFiles[u.file]
		if (isChunk && chunks >= chunkCap) || (bounded && newSlot && perClass[u.u.Class] >= l) {
			kept = append(kept, u)
			continue
		}
		c.leaseLocked(u, m)
		c.pendingByClass[u.u.Class]--
		if newSlot {
			perClass[u.u.Class]++
		}
		if isChunk {
			chunks++
			heldFiles[u.file] = true
		}
		g.Units = append(g.Units, u.u)
	}
	// What was left stays ahead of the rest, in its order, in the slots just looked
	// at: no copy of the units behind them.
	start := i - len(kept)
	copy(c.pending[start:i], kept)
	clear(c.pending[:start]) // handed out: not kept alive by the queue
	c.pending = c.pending[start:]
	if len(g.Units) > 0 && c.firstByte.IsZero() {
		// a stripe asks for work once its session with its receiver is up: the
		// grant's bytes leave now
		c.firstByte = time.Now().UTC()
		c.signalLocked()
	}
	return g, len(g.Units) > 0
}

// guidedShareLocked is how many units one of several stripes may hold: half its share
// of the units not yet done (guided self-scheduling's R ÷ 2P), and no fewer than two
// per file slot, so that every worker has one in hand and one waiting; a stripe alone
// holds what it asks for. Early in a job the share is far above what the size
// classes and the sender's window let a stripe hold, and changes nothing; near the
// end it leaves the last units with whichever stripe is free. Without it the last
// units were spread as the stripes' windows happened to stand when the queue ran
// out, and the stripes then ran alone on unequal amounts: on issue 11's 20 000 ×
// 64 KiB files, with the machine's BBR, one stripe was left holding 220 of the last
// 400 files while another held none, and its streams — paced at the 75–220 Mbit/s
// each had as one of eight — took 1.4 s for the last 121 files (docs/benchmarks.md,
// thirteenth session).
func (c *Core) guidedShareLocked() int {
	stripes := 0
	for m := range c.members {
		if m.stripe >= 0 {
			stripes++
		}
	}
	if stripes < 2 {
		return math.MaxInt
	}
	slots := int(max(c.params.Concurrency, 4))
	for _, sc := range c.params.SizeClasses {
		slots = max(slots, int(sc.Concurrency))
	}
	return max(2*slots, (len(c.units)+2*stripes-1)/(2*stripes))
}

func (c *Core) done(m *Member, rs []wire.UnitResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range rs {
		u := c.units[r.ID]
		if u == nil || u.done {
			continue
		}
		switch {
		case r.OK:
			c.unitDoneLocked(u, r.Digest)
		case r.Retry && u.file.skipped:
			c.retireLocked(u)
		case r.Retry:
			if u.leased == m {
				c.unleaseLocked(u)
				c.pendFrontLocked(u)
			}
		case r.Source && c.opts.SourceErrors == contract.SourceErrorsSkip:
			if u.leased != m && u.leased != nil {
				continue
			}
			c.skipLocked(u, r.Error)
		default:
			if u.leased != m && u.leased != nil {
				continue
			}
			c.retireLocked(u)
			c.errCount++
			if c.errMsg == "" || r.Fatal {
				c.errMsg = r.Error
			}
			c.log.Error("A file failed", "path", fsname.Show(string(u.u.Source)), "err", r.Error)
			if !u.file.failed && !u.file.done && !u.file.skipped {
				u.file.failed = true
				c.filesFailed++
				c.listFailureLocked(contract.FailedFile{Path: fsname.Show(string(u.u.Source)), Error: r.Error})
			}
			if r.Fatal {
				c.fatal = true
				c.phase = contract.PhaseFailed
			}
		}
	}
	c.checkDoneLocked()
	c.signalLocked()
}

func (c *Core) unitDoneLocked(u *cunit, digest string) {
	c.retireLocked(u)
	c.classDone[u.u.Class] += unitBytes(u.u)
	f := u.file
	if digest != "" {
		switch u.u.Kind {
		case wire.UnitFile:
			f.digest = digest
		case wire.UnitChunk:
			f.chunkDigests[u.u.Index] = digest
		}
	}
	if f.failed || f.done || f.skipped {
		return
	}
	switch u.u.Kind {
	case wire.UnitFile, wire.UnitFinalize:
		c.fileDoneLocked(f, u.u.Kind == wire.UnitFile)
	case wire.UnitChunk:
		if !f.chunksDone[u.u.Index] {
			f.chunksDone[u.u.Index] = true
			c.bytesDone += u.u.Length
		}
		if f.chunks == 1 {
			c.fileDoneLocked(f, false)
		} else if int32(len(f.chunksDone)) == f.chunks {
			c.finalizeLocked(f)
		}
	}
}

func (c *Core) fileDoneLocked(f *cfile, countBytes bool) {
	f.done = true
	c.filesDone++
	if countBytes {
		c.bytesDone += f.f.Size
	}
}

func (c *Core) checkDoneLocked() {
	if !c.built || c.phase.Finished() {
		return
	}
	if c.filesDone+c.filesFailed+c.filesSkipped < c.dataset.Files {
		return
	}
	if c.filesFailed > 0 {
		c.phase = contract.PhaseFailed
		if c.errCount > 1 {
			c.errMsg = fmt.Sprintf("%s (and %d more errors)", c.errMsg, c.errCount-1)
		}
		c.log.Info("Job finished", "phase", c.phase, "files", c.filesDone, "bytes", c.bytesDone, "error", c.errMsg)
		return
	}
	if !c.checkingLocked() {
		c.startCheckLocked()
	}
}

// skipLocked ends a unit that failed at its source in a job that skips such files: the
// file is skipped and listed, the rest of its units are dropped (what the receivers
// hold of it stays in their journals and temporary files, as for any file not yet
// final), and the job goes on without it.
func (c *Core) skipLocked(u *cunit, why string) {
	c.retireLocked(u)
	f := u.file
	if f.skipped || f.failed || f.done {
		return
	}
	f.skipped = true
	c.listSkippedLocked(f.f.Path, why)
	kept := c.pending[:0]
	for _, p := range c.pending {
		if p.file == f {
			delete(c.units, p.u.ID)
			c.pendingByClass[p.u.Class]--
			continue
		}
		kept = append(kept, p)
	}
	clear(c.pending[len(kept):])
	c.pending = kept
}

// listSkippedLocked counts a file skipped at the source and keeps it, with why, for the
// report while the list has room.
func (c *Core) listSkippedLocked(path, why string) {
	c.filesSkipped++
	name := fsname.Show(path)
	c.log.Warn("Skipping a file that failed at the source", "path", name, "err", why)
	c.skippedFiles = keepListed(c.skippedFiles, contract.FailedFile{Path: name, Error: why})
}

// listNotMoved counts an entry of the listing that is not a file the job moves and
// keeps it, with why, for the report while the list has room.
func (c *Core) listNotMoved(path, why string) {
	c.entriesNotMoved++
	name := fsname.Show(path)
	c.log.Warn("Not moving a source entry", "path", name, "reason", why)
	c.notMoved = keepListed(c.notMoved, contract.FailedFile{Path: name, Error: why})
}

// listFailureLocked keeps a failed file for the report while the list has room.
func (c *Core) listFailureLocked(f contract.FailedFile) {
	c.failedFiles = keepListed(c.failedFiles, f)
}

// keepListed appends f, within the report's bounds (FailedFile.Bounded), to a list of
// the report while it has room (contract.MaxFailedFiles).
func keepListed(list []contract.FailedFile, f contract.FailedFile) []contract.FailedFile {
	if len(list) >= contract.MaxFailedFiles {
		return list
	}
	return append(list, f.Bounded())
}

// leave gives a departing stripe's units back.
func (c *Core) leave(m *Member) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.members[m] {
		close(m.left)
	}
	delete(c.members, m)
	back := make([]*cunit, 0, len(m.leases))
	for u := range m.leases {
		back = append(back, u)
		c.unleaseLocked(u) // deleting from the map being ranged over is allowed
	}
	sort.Slice(back, func(i, j int) bool { return back[i].u.ID < back[j].u.ID })
	c.pendFrontLocked(back...)
	if len(back) > 0 {
		c.log.Info("A stripe left; its work goes to the others", "stripe", m.stripe, "units", len(back))
	}
	if m.stripe >= 0 {
		delete(c.stats, m.stripe)
	}
	if c.checkingLocked() {
		delete(c.answered, m)
		c.finishCheckLocked()
	}
	c.broadcastConfigLocked()
	c.signalLocked()
}

func (c *Core) setStats(s wire.StripeStats) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !s.Connected {
		delete(c.stats, s.Stripe)
		return
	}
	_, known := c.stats[s.Stripe]
	c.stats[s.Stripe] = s
	if !known {
		c.signalLocked() // a probe waits for a stripe's first stats (its hosts' limits)
	}
}

// memberStripes are the stripes joined and not yet left, ascending.
func (c *Core) memberStripes() []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]int32, 0, len(c.members))
	for m := range c.members {
		out = append(out, m.stripe)
	}
	slices.Sort(out)
	return out
}

// StripeStats is what stripe k's sender last reported, and whether it has reported
// since it connected.
func (c *Core) StripeStats(k int32) (wire.StripeStats, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.stats[k]
	return s, ok
}

// Report is the job as the coordinator sees it now.
func (c *Core) Report() contract.Report {
	c.mu.Lock()
	defer c.mu.Unlock()
	ds := c.dataset
	r := contract.Report{Generation: c.generation, Phase: c.phase, Time: time.Now().UTC(), Error: contract.Cut(c.errMsg, contract.MaxError), Dataset: &ds,
		Samples: append([]contract.Sample(nil), c.samples...), BytesDone: c.bytesDone, BytesTotal: c.dataset.Bytes,
		FilesDone: c.filesDone, FilesTotal: c.dataset.Files, Probe: c.probe, ChannelMoves: c.moves,
		RecentMoves: append([]contract.ChannelMove(nil), c.recentMoves...), Classes: c.classReportLocked(time.Now()),
		FilesFailed: c.filesFailed + c.rejected, FailedFiles: slices.Clone(c.failedFiles),
		FilesSkipped: c.filesSkipped, SkippedFiles: slices.Clone(c.skippedFiles),
		EntriesNotMoved: c.entriesNotMoved, NotMoved: slices.Clone(c.notMoved)}
	if c.ch != nil {
		r.Scheduler = string(c.ch.sched) // "" when static
	}
	if c.built {
		// units given back and then reported done stay queued until a request skips
		// them: this may count a few too many, never too few
		unleased := int64(len(c.pending))
		r.UnitsUnleased = &unleased
	}
	if !c.firstByte.IsZero() {
		t := c.firstByte
		r.FirstByteTime = &t
	}
	idx := make([]int32, 0, len(c.stats))
	for i := range c.stats {
		idx = append(idx, i)
	}
	sort.Slice(idx, func(a, b int) bool { return idx[a] < idx[b] })
	for _, i := range idx {
		s := c.stats[i]
		r.BitsPerSecond += s.BitsPerSecond
		r.Stripes = append(r.Stripes, contract.StripeReport{Index: s.Stripe, Connected: s.Connected, Streams: s.Streams, BitsPerSecond: s.BitsPerSecond,
			BytesDone: s.BytesSent, RTTMicros: s.RTTMicros, LossPPM: s.LossPPM, SourceMillicores: s.SourceMillicores, DestinationMillicores: s.DestinationMillicores})
	}
	return r
}

// SetGeneration records the generation of the last directive applied.
func (c *Core) SetGeneration(g int64) {
	c.mu.Lock()
	c.generation = g
	c.signalLocked()
	c.mu.Unlock()
}

// SetProbe records where a probe on the job's own data is (PhaseProbing, PhaseProbed,
// or "" for none).
func (c *Core) SetProbe(p contract.Phase) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.probe != p {
		c.probe = p
		c.signalLocked()
	}
}

// SetSampleParams sets the streams, buffer and stripes an on-data sample measures
// (stripes > 1: the probe stripe runs helpers, wire.JobConfig.SampleStripes), keeping
// the other parameters, and returns the job configuration's generation that carries them
// (the stripes apply it without restarting; the sample waits for it).
func (c *Core) SetSampleParams(streams int32, buffer int64, stripes int32) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.params
	stripes = max(stripes, 1)
	if stripes == 1 {
		stripes = 0
	}
	if p.Streams != streams || p.BufferBytes != buffer || p.SampleStripes != stripes {
		p.Streams, p.BufferBytes, p.SampleStripes = streams, buffer, stripes
		c.setParamsLocked(p)
		c.signalLocked()
	}
	return c.cfg.Generation
}

// reportKey is what a report says that the controller acts on: a change of it is
// published at once, not at the next report interval.
type reportKey struct {
	phase, probe       contract.Phase
	generation         int64
	samples, stripes   int
	firstByte, dataset bool
	moves              int64
}

func (c *Core) reportKey() reportKey {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := reportKey{phase: c.phase, probe: c.probe, generation: c.generation, samples: len(c.samples), firstByte: !c.firstByte.IsZero(), dataset: c.built, moves: c.moves}
	for m := range c.members {
		if m.stripe >= 0 {
			k.stripes++
		}
	}
	return k
}

// AddSample records a probe sample.
func (c *Core) AddSample(s contract.Sample) {
	c.mu.Lock()
	c.samples = append(c.samples, s)
	c.signalLocked()
	c.mu.Unlock()
}

// Samples are the probe samples so far.
func (c *Core) Samples() []contract.Sample {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]contract.Sample(nil), c.samples...)
}

// Status is the JSON status of a coordinator.
func (c *Core) Status() any {
	r := c.Report()
	return struct {
		Role string `json:"role"`
		contract.Report
		CPUSeconds float64 `json:"cpuSeconds"`
	}{"coordinator", r, metrics.CPUSeconds()}
}

// ---- members: the stripes, as work sources ----

// Member is one stripe's membership of the job; it is the stripe's WorkSource.
type Member struct {
	c       *Core
	stripe  int32
	configs chan wire.JobConfig
	probes  chan wire.ProbeRequest
	results chan wire.ProbeResult
	// left is closed when the stripe leaves: a probe waiting for its result ends.
	left chan struct{}
	// leases are the units the stripe holds (guarded by c.mu).
	leases map[*cunit]struct{}
}

// Join adds a stripe.
func (c *Core) Join(stripe int32) *Member {
	m := &Member{c: c, stripe: stripe, configs: make(chan wire.JobConfig, 1), probes: make(chan wire.ProbeRequest, 1), results: make(chan wire.ProbeResult, 1),
		left: make(chan struct{}), leases: map[*cunit]struct{}{}}
	c.mu.Lock()
	c.members[m] = true
	c.broadcastConfigLocked()
	c.signalLocked()
	c.mu.Unlock()
	c.log.Info("A stripe joined", "stripe", stripe)
	return m
}

func (c *Core) isMember(m *Member) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.members[m]
}

// Leave removes the stripe and gives its work back.
func (m *Member) Leave() { m.c.leave(m) }

func (m *Member) pushConfig(cfg wire.JobConfig) {
	select {
	case <-m.configs:
	default:
	}
	m.configs <- cfg
}

func (m *Member) Configs() <-chan wire.JobConfig { return m.configs }
func (m *Member) NeedSummary() bool              { return m.c.needSummary() }
func (m *Member) Summary(s wire.Summary)         { m.c.summary(s) }
func (m *Member) Manifest(mf wire.Manifest)      { m.c.manifestPart(m, mf) }
func (m *Member) Done(rs []wire.UnitResult)      { m.c.done(m, rs) }
func (m *Member) Stats(s wire.StripeStats)       { m.c.setStats(s) }
func (m *Member) Probes() <-chan wire.ProbeRequest {
	return m.probes
}
func (m *Member) ProbeDone(r wire.ProbeResult) {
	select {
	case m.results <- r:
	default:
	}
}

// Request implements mover.WorkSource.
func (m *Member) Request(ctx context.Context, n int) (wire.WorkGrant, error) {
	for {
		ch := m.c.Changed()
		if g, ok := m.c.request(m, n); ok {
			return g, nil
		}
		if !m.c.isMember(m) {
			return wire.WorkGrant{}, mover.ErrSourceLost
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return wire.WorkGrant{}, ctx.Err()
		}
	}
}

// errStripeLeft ends a probe whose stripe left before answering.
var errStripeLeft = errors.New("the stripe left before its sample ended")

// Probe asks the member's stripe for one sample (memory to memory, or on the job's
// own data); it fails when the stripe leaves first.
func (m *Member) Probe(ctx context.Context, p wire.ProbeRequest) (wire.ProbeResult, error) {
	select {
	case <-m.results: // a result of a sample nobody waits for any more
	default:
	}
	select {
	case m.probes <- p:
	case <-ctx.Done():
		return wire.ProbeResult{}, ctx.Err()
	case <-m.left:
		return wire.ProbeResult{}, errStripeLeft
	}
	select {
	case r := <-m.results:
		return r, nil
	case <-ctx.Done():
		return wire.ProbeResult{}, ctx.Err()
	case <-m.left:
		return wire.ProbeResult{}, errStripeLeft
	}
}

// ProbeMember is the stripe with the lowest index, which runs probes.
func (c *Core) ProbeMember() *Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	var best *Member
	for m := range c.members {
		if m.stripe >= 0 && (best == nil || m.stripe < best.stripe) {
			best = m
		}
	}
	return best
}
