package wire

import (
	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/agent/fsname"
)

// Role of a connection, declared in Hello.
type Role string

const (
	RoleControl Role = "control" // a stripe's control connection to its receiver
	RoleData    Role = "data"    // one of a stripe's data streams to its receiver
	RoleSender  Role = "sender"  // a sender's connection to its coordinator
)

// Hello is the first frame on every authenticated connection.
type Hello struct {
	Role    Role   `json:"role"`
	Session uint64 `json:"session"` // the stripe session a data stream belongs to
	Stripe  int32  `json:"stripe"`
	Stream  int32  `json:"stream,omitempty"`
	// BufferBytes asks the receiver to set SO_RCVBUF on this stream (0: autotuning).
	BufferBytes int64  `json:"bufferBytes,omitempty"`
	Agent       string `json:"agent,omitempty"` // host/pid of the peer, for logs
}

// Session configures a stripe session on its control connection.
type Session struct {
	Job string `json:"job"`
	Run string `json:"run,omitempty"` // the run of the job (JobConfig.Run)
	// Encrypt says every frame of the session, both ways, is encrypted; the receiver
	// refuses a clear one.
	Encrypt  bool   `json:"encrypt,omitempty"`
	Memory   bool   `json:"memory,omitempty"` // memory-to-memory: data is discarded
	Checksum string `json:"checksum,omitempty"`
	Verify   bool   `json:"verify"`
	// VerifyMode is where the destination's digest comes from (JobConfig.VerifyMode).
	VerifyMode string `json:"verifyMode,omitempty"`
	Overwrite  string `json:"overwrite,omitempty"`
	BlockSize  int64  `json:"blockSize,omitempty"`
	ChunkSize  int64  `json:"chunkSize,omitempty"`
}

// SessionOK accepts a Session.
type SessionOK struct {
	Receiver string `json:"receiver"`
	// Limits are the receiver's socket buffer limits, so that a sender choosing
	// buffers knows what each can reach at this end (absent from older receivers).
	Limits *SocketLimits `json:"limits,omitempty"`
}

// SocketLimits are a host's TCP socket buffer limits (Linux sysctls, in the kernel's
// units: an explicit SO_SNDBUF/SO_RCVBUF of x gets 2·min(x, max) bytes, overhead
// included; autotuning grows a buffer up to AutotuneMax, overhead included). 0 means
// unknown or, for RcvAutotuneMax, receive autotuning switched off.
type SocketLimits struct {
	// SndAutotuneMax is net.ipv4.tcp_wmem's maximum; SndMax is net.core.wmem_max.
	SndAutotuneMax int64 `json:"sndAutotuneMax,omitempty"`
	SndMax         int64 `json:"sndMax,omitempty"`
	// RcvAutotuneMax is net.ipv4.tcp_rmem's maximum when net.ipv4.tcp_moderate_rcvbuf
	// is on; RcvMax is net.core.rmem_max.
	RcvAutotuneMax int64 `json:"rcvAutotuneMax,omitempty"`
	RcvMax         int64 `json:"rcvMax,omitempty"`
}

// ChunkOpen announces a chunk of a large file; blocks follow on the data streams once
// the receiver answers ChunkOpened.
type ChunkOpen struct {
	ID        uint64      `json:"id"`
	Path      fsname.Path `json:"path"` // destination path under the receiver's root
	FileSize  int64       `json:"fileSize"`
	Mode      uint32      `json:"mode"`
	MtimeNs   int64       `json:"mtimeNs"`
	Index     int32       `json:"index"`  // chunk index
	Chunks    int32       `json:"chunks"` // chunks in the file
	Offset    int64       `json:"offset"`
	Length    int64       `json:"length"`
	ChunkSize int64       `json:"chunkSize"`
	BlockSize int64       `json:"blockSize"`
}

// ChunkOpened answers ChunkOpen: which blocks the receiver already holds durably (by
// index within the chunk), or that the chunk is already verified, or an error.
type ChunkOpened struct {
	ID       uint64     `json:"id"`
	Have     [][2]int64 `json:"have,omitempty"` // [start, end) block index ranges
	Verified bool       `json:"verified,omitempty"`
	Error    string     `json:"error,omitempty"`
	Fatal    bool       `json:"fatal,omitempty"`
	// Retry says the error was momentary (out of file descriptors, say): send again.
	Retry bool `json:"retry,omitempty"`
}

// ChunkEnd closes a chunk: every block has been sent; Digest is the source digest of
// the whole chunk when verifying.
type ChunkEnd struct {
	ID     uint64 `json:"id"`
	Blocks int64  `json:"blocks"`
	Digest []byte `json:"digest,omitempty"`
}

// Result is the receiver's verdict on a small file (Unit) or a chunk (Chunk).
type Result struct {
	Unit  uint64 `json:"unit,omitempty"`
	Chunk uint64 `json:"chunk,omitempty"`
	OK    bool   `json:"ok"`
	// Retry says the data was damaged in flight or failed verification: send again.
	Retry bool   `json:"retry,omitempty"`
	Error string `json:"error,omitempty"`
	// Fatal says the whole job cannot go on (for example, the disk is full).
	Fatal bool `json:"fatal,omitempty"`
	// Skipped says the destination already had this content (IfDifferent).
	Skipped bool  `json:"skipped,omitempty"`
	Bytes   int64 `json:"bytes,omitempty"`
}

// Results carries several results.
type Results struct {
	Results []Result `json:"results"`
}

// Finalize asks the receiver to give a file of several chunks its final name once all
// of its chunks are verified (by any receiver of the job).
type Finalize struct {
	ID        uint64      `json:"id"`
	Path      fsname.Path `json:"path"`
	FileSize  int64       `json:"fileSize"`
	Mode      uint32      `json:"mode"`
	MtimeNs   int64       `json:"mtimeNs"`
	Chunks    int32       `json:"chunks"`
	ChunkSize int64       `json:"chunkSize"`
}

// DoneFile names a file already complete at the destination.
type DoneFile struct {
	Path    fsname.Path `json:"p"`
	Size    int64       `json:"s"`
	MtimeNs int64       `json:"m"`
}

// DoneChunk names a verified chunk of a file not yet complete.
type DoneChunk struct {
	Path      fsname.Path `json:"p"`
	Size      int64       `json:"s"`
	MtimeNs   int64       `json:"m"`
	ChunkSize int64       `json:"cs"`
	Index     int32       `json:"i"`
}

// Verification modes (JobConfig.VerifyMode): where the destination's digest of a file
// or chunk, compared with the source's, comes from.
const (
	// VerifyReadBack reads the file back through the file system once it is written
	// and digests what it reads: it proves the destination's file system returns the
	// source's bytes (from the page cache, right after the write; what a disk does
	// later is not seen), at the cost of a second pass over every byte.
	VerifyReadBack = "ReadBack"
	// VerifyOnArrival digests each block as it arrives, after its frame's check and
	// before it is written; a chunk's digest is the digest of its blocks' digests, at
	// both ends. It proves the receiver got the source's bytes and handed exactly them
	// to the file system, in one pass; not what the file system did with them. Blocks
	// that arrived in an earlier session (resumed from the journal) are read back.
	VerifyOnArrival = "OnArrival"
)

// In-flight modes (JobConfig.InFlight).
const (
	// InFlightAuthenticated covers every frame's data by its tag: accidents and
	// deliberate rewrites are caught.
	InFlightAuthenticated = "Authenticated"
	// InFlightChecksum covers data frames' headers and meta by their tag and their
	// data by a CRC32C carried in the meta: accidents are caught, and a forged name,
	// offset or length; content crafted to keep its CRC32C is not (a CRC is not a
	// cryptographic check). It costs less CPU per byte.
	InFlightChecksum = "Checksum"
	// InFlightHeadersOnly covers data frames' headers and meta by their tag and leaves
	// their data unchecked in flight (TCP's own checksum only), so that it can move
	// from file to socket and socket to file without a pass through user space; the
	// end-to-end digest, when the job verifies, is what checks it.
	InFlightHeadersOnly = "HeadersOnly"
	// InFlightEncrypted is InFlightAuthenticated with every frame's meta and data
	// encrypted (AES-256-CTR, then the tag over the ciphertext): nobody on the path
	// reads names or content.
	InFlightEncrypted = "Encrypted"
)

// ManifestQuery asks a receiver for the job's final files, as its journal and its file
// system show them now.
type ManifestQuery struct {
	// Run is the asking run's id, so that the answer can say which files this run
	// made final.
	Run string `json:"run"`
	// Packed asks for the answer's files in Manifest.Packed. A receiver that predates
	// it ignores it and answers in Manifest.Files, which the asker still reads.
	Packed bool `json:"z,omitempty"`
}

// ManifestFile is one version of a file the journal says is final.
type ManifestFile struct {
	Path    fsname.Path `json:"p"`
	Size    int64       `json:"s"`
	MtimeNs int64       `json:"m"`
	// Digest is the verified digest of a file sent whole or in one chunk (hex; empty
	// when the job did not verify); Chunks those of a file of several chunks, by
	// index.
	Digest string   `json:"d,omitempty"`
	Chunks []string `json:"c,omitempty"`
	// ThisRun says the asking run made it final.
	ThisRun bool `json:"r,omitempty"`
	// Problem says why the file is not at its final name as journaled (missing, of
	// another size or mtime, not a regular file); empty when it is.
	Problem string `json:"x,omitempty"`
}

// Manifest answers ManifestQuery, in parts, the last with Last set. Debris counts
// temporary files of final files the receiver found and removed.
type Manifest struct {
	Files []ManifestFile `json:"files,omitempty"`
	// Packed holds the part's files in the packed form (PackManifestFiles) instead of
	// Files, when the query asked for it.
	Packed []byte `json:"z,omitempty"`
	Debris int64  `json:"debris,omitempty"`
	Last   bool   `json:"last"`
}

// Summary is what the receivers' journals of a job say is done; sent in parts, the
// last with Last set.
type Summary struct {
	Files  []DoneFile  `json:"files,omitempty"`
	Chunks []DoneChunk `json:"chunks,omitempty"`
	Last   bool        `json:"last"`
}

// PeerStats is a receiver's running totals, sent on the control connection about
// twice a second.
type PeerStats struct {
	Bytes int64 `json:"bytes"`
	// MemBytes is what this session received memory-to-memory.
	MemBytes   int64   `json:"memBytes,omitempty"`
	CPUSeconds float64 `json:"cpuSeconds"`
	UnixNano   int64   `json:"unixNano"`
}

// MemEnd ends a memory-to-memory run of Bytes bytes; the receiver answers with
// PeerStats as soon as it has received them all.
type MemEnd struct {
	Bytes int64 `json:"bytes"`
}

// ErrorMsg explains why a peer is closing the connection.
type ErrorMsg struct {
	Error string `json:"error"`
	// Integrity says a frame arrived other than it was sent: the session may be
	// retried, and what it carried is sent again.
	Integrity bool `json:"integrity,omitempty"`
	// Retry says the peer refused for want of something it may have again soon (file
	// descriptors, memory): the same session may be tried again.
	Retry bool `json:"retry,omitempty"`
}

// Unit is one piece of work the coordinator hands a stripe: a small file, a chunk of a
// large file, or the finalization of a large file.
type Unit struct {
	ID      uint64      `json:"id"`
	Kind    UnitKind    `json:"kind"`
	Source  fsname.Path `json:"source"` // path under the source root
	Dest    fsname.Path `json:"dest"`   // path under the destination root
	Size    int64       `json:"size"`   // file size
	Mode    uint32      `json:"mode"`
	MtimeNs int64       `json:"mtimeNs"`
	Index   int32       `json:"index,omitempty"`
	Chunks  int32       `json:"chunks,omitempty"`
	Offset  int64       `json:"offset,omitempty"`
	Length  int64       `json:"length,omitempty"`
	Class   string      `json:"class,omitempty"` // size class
}

// UnitKind says what a Unit is.
type UnitKind string

const (
	UnitFile     UnitKind = "file"     // a small file, sent in one File frame
	UnitChunk    UnitKind = "chunk"    // a chunk of a file
	UnitFinalize UnitKind = "finalize" // rename a file whose chunks are all verified
)

// JobConfig is what the coordinator tells its senders; a newer Generation replaces it.
type JobConfig struct {
	Generation int64  `json:"generation"`
	Job        string `json:"job"`
	// InFlight is how data frames are checked on the way: InFlightAuthenticated (the
	// default) or InFlightChecksum.
	InFlight string `json:"inFlight,omitempty"`
	// Run tells this run of the job apart from others: the receiver records it with
	// every file it makes final (ManifestFile.ThisRun).
	Run      string        `json:"run,omitempty"`
	Mode     contract.Mode `json:"mode"`
	Checksum string        `json:"checksum"`
	Verify   bool          `json:"verify"`
	// VerifyMode is VerifyReadBack (default) or VerifyOnArrival.
	VerifyMode  string                    `json:"verifyMode,omitempty"`
	Overwrite   string                    `json:"overwrite"`
	Streams     int32                     `json:"streams"`
	BufferBytes int64                     `json:"bufferBytes,omitempty"`
	Concurrency int32                     `json:"concurrency"`
	Pipelining  int32                     `json:"pipelining"`
	BlockSize   int64                     `json:"blockSize"`
	ChunkSize   int64                     `json:"chunkSize"`
	SizeClasses []contract.SizeClassParam `json:"sizeClasses,omitempty"`
	// MaxBitsPerSecond is this stripe's share of the job's cap (0: none).
	MaxBitsPerSecond int64 `json:"maxBitsPerSecond,omitempty"`
	// NeedSummary asks the stripe to pass on its receiver's journal summary.
	NeedSummary bool `json:"needSummary,omitempty"`
	// SampleStripes, when > 1, asks the probe stripe (stripe 0) to run as many stripes
	// as that from its own process for a probe sample of several stripes: it starts
	// SampleStripes−1 helper stripes to its receiver, which pull work like any stripe,
	// and stops them when a configuration asks for fewer (the plan's own stripes take
	// over). Other stripes ignore it.
	SampleStripes int32 `json:"sampleStripes,omitempty"`
}

// WorkRequest asks the coordinator for up to N more units.
type WorkRequest struct {
	N int32 `json:"n"`
}

// WorkGrant hands units out. Finished says there will be no more work for anyone; Wait
// says none now but maybe later (units leased to other stripes may come back).
type WorkGrant struct {
	Units    []Unit `json:"units,omitempty"`
	Finished bool   `json:"finished,omitempty"`
	Wait     bool   `json:"wait,omitempty"`
	// Manifest asks the stripe to fetch its receiver's manifest and pass it on: every
	// file is done, and the coordinator checks the destination before it says
	// Complete.
	Manifest bool `json:"manifest,omitempty"`
	// PackedManifest says the coordinator reads the manifest's files packed
	// (Manifest.Packed): a stripe passes them on so. A coordinator that predates it
	// leaves it false and gets them in JSON.
	PackedManifest bool `json:"packedManifest,omitempty"`
}

// UnitResult reports a unit's end.
type UnitResult struct {
	ID    uint64 `json:"id"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	// Retry gives the unit back for another attempt (its stripe lost its receiver).
	Retry bool `json:"retry,omitempty"`
	Fatal bool `json:"fatal,omitempty"`
	// Source says the unit failed at its source file (it could not be read, vanished,
	// or changed since it was listed or while it was read), not at the destination.
	Source bool  `json:"source,omitempty"`
	Bytes  int64 `json:"bytes,omitempty"`
	// Digest is the source digest of what the unit sent (a small file, a chunk; hex),
	// when the job verifies: the coordinator compares it with the destination's
	// manifest.
	Digest string `json:"digest,omitempty"`
}

// WorkDone reports units' ends.
type WorkDone struct {
	Results []UnitResult `json:"results"`
}

// StripeStats is a sender's view of its stripe, sent to the coordinator every second.
type StripeStats struct {
	Stripe    int32 `json:"stripe"`
	Connected bool  `json:"connected"`
	Streams   int32 `json:"streams"`
	// BytesSent is what the stripe has written into its streams' sockets.
	BytesSent int64 `json:"bytesSent"`
	// BitsPerSecond and StreamBitsPerSecond are what arrived over the last second:
	// the bytes the receiver's TCP acknowledged, selectively acknowledged ones
	// included (metrics.TCPInfo.DeliveredBytes), not what was written.
	BitsPerSecond         int64   `json:"bitsPerSecond"`
	StreamBitsPerSecond   []int64 `json:"streamBitsPerSecond,omitempty"`
	RTTMicros             int64   `json:"rttMicros,omitempty"`
	LossPPM               int64   `json:"lossPPM,omitempty"`
	SourceCPUSeconds      float64 `json:"sourceCpuSeconds"`
	DestinationCPUSeconds float64 `json:"destinationCpuSeconds"`
	SourceMillicores      int64   `json:"sourceMillicores"`
	DestinationMillicores int64   `json:"destinationMillicores"`
	// SourceLimits and DestinationLimits are the socket buffer limits of the sender's
	// host and of its receiver (from SessionOK; nil when it did not say), sent from
	// the session's first moment, so that a probe knows which buffer sizes can
	// matter before its first sample (wire.UsefulBuffers).
	SourceLimits      *SocketLimits `json:"sourceLimits,omitempty"`
	DestinationLimits *SocketLimits `json:"destinationLimits,omitempty"`
}

// ProbeRequest asks a stripe for one sample: memory to memory, or with OnData a
// stretch of the job's own transfer.
type ProbeRequest struct {
	Streams     int32 `json:"streams"`
	BufferBytes int64 `json:"bufferBytes,omitempty"`
	// Seconds is how long the sample runs, or with Settle its ceiling.
	Seconds int32 `json:"seconds"`
	// Settle ends the sample as soon as its rate is precise (package settle) and
	// reports that rate, slow start left out. Absent (an older coordinator), the
	// sample runs its whole Seconds and reports the rate over all of it.
	Settle bool `json:"settle,omitempty"`
	// OnData measures the stripe's own transfer instead of generated bytes: once the
	// stripe runs under job configuration Generation (or a later one) with Streams
	// data streams, the sample follows what its receiver's TCP acknowledged until the
	// rate settles (Settle is implied). The job's configuration, not the request,
	// sets the streams and buffer.
	OnData     bool  `json:"onData,omitempty"`
	Generation int64 `json:"generation,omitempty"`
	// ThresholdBitsPerSecond, when > 0, is the rate the sample is compared with: it
	// may end as soon as its rate is clearly above or below (settle.Limits.Threshold).
	ThresholdBitsPerSecond int64 `json:"thresholdBitsPerSecond,omitempty"`
	// Stripes, for an on-data sample, is how many stripes it measures together: the
	// probe stripe and its helpers (JobConfig.SampleStripes); the sample is their
	// aggregate. 0 or 1: the stripe alone.
	Stripes int32 `json:"stripes,omitempty"`
}

// ProbeResult is one sample.
type ProbeResult struct {
	Sample contract.Sample `json:"sample"`
	Error  string          `json:"error,omitempty"`
	// Seconds is how long the sample ran; Settled says it ended on a settled rate
	// rather than at its ceiling (absent from older senders).
	Seconds float64 `json:"seconds,omitempty"`
	Settled bool    `json:"settled,omitempty"`
	// SourceLimits and DestinationLimits are the socket buffer limits of the sender's
	// host and of its receiver's (nil when unknown or from older agents), so that the
	// coordinator samples only buffers that take a different effect (UsefulBuffers).
	SourceLimits      *SocketLimits `json:"sourceLimits,omitempty"`
	DestinationLimits *SocketLimits `json:"destinationLimits,omitempty"`
}
