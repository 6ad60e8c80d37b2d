// Package agentlogs is the archive of a TransferJob's agent logs: the last lines of each
// agent pod, kept by the manager in a ConfigMap the job owns (<job>-agent-logs) just
// before it deletes the pod — a failed pod before its replacement takes its name, and
// every agent when the job ends — so that `kubectl dtnflow logs JOB` still has them
// once the pods are gone, until the job's TTL (spec.ttlSecondsAfterFinished) or its
// deletion takes the archive with it.
//
// The archive is bounded whatever the job does: each pod keeps its last PodBytes, the
// texts of failed pods together at most FailureBytes (the oldest go first), and all
// texts at most TotalBytes, well under the 1 MiB an object may hold. When a job ends
// with more pods than fit, each gets an equal share (at least MinShareBytes) and those
// that still do not fit are counted, not kept. This package only shapes the data; the
// controller fetches the logs and writes the object.
package agentlogs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// The archive's bounds.
const (
	// PodBytes is the most of one pod's log kept: its last bytes, from a line start.
	PodBytes = 32 << 10
	// TotalBytes bounds the texts of all the pods archived.
	TotalBytes = 512 << 10
	// FailureBytes bounds the texts of pods archived because they failed: the other
	// half stays for the end of the job.
	FailureBytes = TotalBytes / 2
	// MinShareBytes is the least a pod archived at the end of a job keeps when many
	// share the room.
	MinShareBytes = 4 << 10
)

// IndexKey is the data key of the archive's index; every pod's text is under a key
// ending in ".log".
const IndexKey = "index.json"

// Reasons a pod's log was archived.
const (
	// ReasonFailed: the pod failed (or its coordinator ended unfinished) and is
	// deleted to be replaced.
	ReasonFailed = "Failed"
	// ReasonFinished: the job ended (complete, partially complete or failed) and its
	// agents are stopped.
	ReasonFinished = "Finished"
)

// Record describes one archived pod's log.
type Record struct {
	// Key is the data key of the text (absent when Error says why there is none).
	Key    string `json:"key,omitempty"`
	Pod    string `json:"pod"`
	UID    string `json:"uid"`
	Role   string `json:"role,omitempty"`
	Stripe string `json:"stripe,omitempty"`
	// Reason is ReasonFailed or ReasonFinished; Ended says how the pod ended when it
	// did ("exit code 1, Error: …").
	Reason string    `json:"reason"`
	Ended  string    `json:"ended,omitempty"`
	Time   time.Time `json:"time"`
	// Bytes is the size of the text kept; Cut says earlier lines were left out.
	Bytes int  `json:"bytes"`
	Cut   bool `json:"cut,omitempty"`
	// Error says why the log could not be read.
	Error string `json:"error,omitempty"`
}

// Index is the archive's table of contents, oldest record first.
type Index struct {
	Records []Record `json:"records"`
	// NotKept counts pods whose logs did not fit when their job ended.
	NotKept int `json:"notKept,omitempty"`
}

// Log is one pod's fetched log, to be added.
type Log struct {
	Record
	Text []byte
}

// Archive is the archive as the ConfigMap's data holds it.
type Archive struct {
	Index Index
	Texts map[string]string
}

// Decode reads an archive from a ConfigMap's data (nil or empty: a new archive).
func Decode(data map[string]string) (*Archive, error) {
	a := &Archive{Texts: map[string]string{}}
	if raw, ok := data[IndexKey]; ok {
		if err := json.Unmarshal([]byte(raw), &a.Index); err != nil {
			return nil, fmt.Errorf("reading the archive's %s: %w", IndexKey, err)
		}
	}
	for _, r := range a.Index.Records {
		if r.Key != "" {
			a.Texts[r.Key] = data[r.Key]
		}
	}
	return a, nil
}

// Data is the archive as ConfigMap data.
func (a *Archive) Data() map[string]string {
	raw, err := json.Marshal(a.Index)
	if err != nil {
		panic(fmt.Sprintf("encoding the archive's index: %v", err)) // plain types only
	}
	out := map[string]string{IndexKey: string(raw)}
	for _, r := range a.Index.Records {
		if r.Key != "" {
			out[r.Key] = a.Texts[r.Key]
		}
	}
	return out
}

// Has says whether the pod of this UID is archived already.
func (a *Archive) Has(uid string) bool {
	for _, r := range a.Index.Records {
		if r.UID == uid {
			return true
		}
	}
	return false
}

// Add archives logs fetched together for one reason, within the bounds: a pod already
// archived is skipped; failed pods' texts evict the oldest failed pods' beyond
// FailureBytes; an end of job evicts earlier ends' texts (a recurring job's earlier
// runs) to make room, then shares what room there is.
func (a *Archive) Add(logs []Log) {
	var batch []Log
	for _, l := range logs {
		if !a.Has(l.UID) {
			l.cut(PodBytes)
			batch = append(batch, l)
		}
	}
	if len(batch) == 0 {
		return
	}
	failures := batch[0].Reason == ReasonFailed
	if failures {
		need := 0
		for _, l := range batch {
			need += len(l.Text)
		}
		for a.bytes(ReasonFailed)+need > FailureBytes && a.evictOldest(ReasonFailed) {
		}
		for a.bytes("")+need > TotalBytes && a.evictOldest(ReasonFinished) {
		}
	} else {
		for TotalBytes-a.bytes("") < len(batch)*PodBytes && a.evictOldest(ReasonFinished) {
		}
		share := max((TotalBytes-a.bytes(""))/len(batch), MinShareBytes)
		for i := range batch {
			batch[i].cut(share)
		}
	}
	for _, l := range batch {
		r := l.Record
		r.Key, r.Bytes = "", 0
		if len(l.Text) > 0 {
			if a.bytes("")+len(l.Text) > TotalBytes {
				a.Index.NotKept++
				continue
			}
			r.Key = textKey(r.Pod, r.UID)
			r.Bytes = len(l.Text)
			a.Texts[r.Key] = string(l.Text)
		}
		a.Index.Records = append(a.Index.Records, r)
	}
	sort.SliceStable(a.Index.Records, func(i, j int) bool { return a.Index.Records[i].Time.Before(a.Index.Records[j].Time) })
}

// cut keeps the last n bytes of the log's text, saying so when it drops any.
func (l *Log) cut(n int) {
	c := Cut(l.Text, n)
	l.Cut = l.Cut || len(c) < len(l.Text)
	l.Text = c
}

// bytes is the text kept for records of a reason ("": all).
func (a *Archive) bytes(reason string) int {
	n := 0
	for _, r := range a.Index.Records {
		if reason == "" || r.Reason == reason {
			n += r.Bytes
		}
	}
	return n
}

// evictOldest removes the oldest record of a reason that holds text; false when none.
func (a *Archive) evictOldest(reason string) bool {
	for i, r := range a.Index.Records {
		if r.Reason == reason && r.Key != "" {
			delete(a.Texts, r.Key)
			a.Index.Records = append(a.Index.Records[:i:i], a.Index.Records[i+1:]...)
			a.Index.NotKept++
			return true
		}
	}
	return false
}

// textKey is the data key of a pod's text: its name (cut so that the key stays within
// the 253 characters a key may have) and its UID, since a replacement has the same name.
func textKey(pod, uid string) string {
	return pod[:min(len(pod), 200)] + "." + uid + ".log"
}

// Cut keeps the last n bytes of a log, from the start of a line when it has to cut
// (a line longer than n is cut mid-line), as valid UTF-8.
func Cut(text []byte, n int) []byte {
	if len(text) > n {
		text = fromLineStart(text[len(text)-n:])
	}
	if !utf8.Valid(text) {
		text = []byte(strings.ToValidUTF8(string(text), "\uFFFD"))
	}
	for len(text) > n { // a replacement character is longer than the byte it replaces
		_, size := utf8.DecodeRune(text)
		text = text[size:]
	}
	return text
}

// Tail is an io.Writer that keeps the last Limit bytes written to it: a pod's whole
// log streams through it in bounded memory.
type Tail struct {
	Limit int
	buf   []byte
	// Written counts every byte written.
	Written int64
}

func (t *Tail) Write(p []byte) (int, error) {
	t.Written += int64(len(p))
	if len(p) >= t.Limit {
		t.buf = append(t.buf[:0], p[len(p)-t.Limit:]...)
		return len(p), nil
	}
	if over := len(t.buf) + len(p) - t.Limit; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return len(p), nil
}

// Bytes is what the tail holds, from a line start when earlier bytes were dropped.
func (t *Tail) Bytes() []byte {
	b := t.buf
	if t.Dropped() {
		b = fromLineStart(b)
	}
	return Cut(b, t.Limit)
}

// fromLineStart drops the partial line a cut left at the front, unless the text is one
// line.
func fromLineStart(text []byte) []byte {
	if i := bytes.IndexByte(text, '\n'); i >= 0 && i+1 < len(text) {
		return text[i+1:]
	}
	return text
}

// Dropped says whether bytes before the tail were left out.
func (t *Tail) Dropped() bool { return t.Written > int64(len(t.buf)) }
