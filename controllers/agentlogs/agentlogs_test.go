package agentlogs

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// logOf is a log of n bytes of numbered lines.
func logOf(pod string, n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "time=2026-03-01T12:00:00Z level=INFO msg=\"line %d of %s\"\n", i, pod)
	}
	return b.Bytes()[:n]
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func podLog(pod, reason string, n, at int) Log {
	return Log{Record: Record{Pod: pod, UID: fmt.Sprintf("uid-%s-%d", pod, at), Reason: reason, Time: t0.Add(time.Duration(at) * time.Second)}, Text: logOf(pod, n)}
}

func TestTailKeepsTheLastLinesInBoundedMemory(t *testing.T) {
	tail := &Tail{Limit: 1000}
	var all bytes.Buffer
	for i := range 5000 {
		line := fmt.Sprintf("line %d\n", i)
		all.WriteString(line)
		tail.Write([]byte(line))
		if cap(tail.buf) > 4*tail.Limit {
			t.Fatalf("the tail grew to %d bytes for a limit of %d", cap(tail.buf), tail.Limit)
		}
	}
	got := tail.Bytes()
	if len(got) > 1000 || !bytes.HasSuffix(all.Bytes(), got) || !bytes.HasPrefix(got, []byte("line ")) || !bytes.HasSuffix(got, []byte("line 4999\n")) {
		t.Fatalf("tail %q: want the last whole lines, at most 1000 bytes", got)
	}
	if !tail.Dropped() || tail.Written != int64(all.Len()) {
		t.Errorf("dropped %v, written %d of %d", tail.Dropped(), tail.Written, all.Len())
	}
	short := &Tail{Limit: 1000}
	short.Write([]byte("one\ntwo\n"))
	if string(short.Bytes()) != "one\ntwo\n" || short.Dropped() {
		t.Errorf("a short log is kept whole: %q", short.Bytes())
	}
	big := &Tail{Limit: 10}
	big.Write(bytes.Repeat([]byte("x"), 100))
	if len(big.Bytes()) != 10 {
		t.Errorf("one write longer than the limit: %d bytes kept", len(big.Bytes()))
	}
}

func TestCutIsValidUTF8WithinBounds(t *testing.T) {
	text := []byte("a\xfe\xffb\nπππππ\n")
	for n := 1; n <= len(text)+2; n++ {
		got := Cut(text, n)
		if len(got) > n || !utf8.Valid(got) {
			t.Errorf("Cut(%d) = %q: %d bytes, valid %v", n, got, len(got), utf8.Valid(got))
		}
	}
}

// TestArchiveBounds: whatever a job does — many failed pods, a large end — each pod
// keeps at most PodBytes, failed pods' texts at most FailureBytes (newest kept), all
// texts at most TotalBytes, and the object stays well under 1 MiB.
func TestArchiveBounds(t *testing.T) {
	a, _ := Decode(nil)
	check := func(when string) {
		t.Helper()
		size := 0
		for k, v := range a.Data() {
			size += len(k) + len(v)
		}
		if a.bytes("") > TotalBytes || a.bytes(ReasonFailed) > FailureBytes || size > 700<<10 {
			t.Fatalf("%s: %d bytes of text (%d of failed pods), %d in the object", when, a.bytes(""), a.bytes(ReasonFailed), size)
		}
		for _, r := range a.Index.Records {
			if r.Bytes > PodBytes || len(a.Texts[r.Key]) != r.Bytes {
				t.Fatalf("%s: %s keeps %d bytes (text %d)", when, r.Pod, r.Bytes, len(a.Texts[r.Key]))
			}
		}
	}
	// 30 failures of a sender whose log is 100 KiB each: the newest 8 fit in the half.
	for i := range 30 {
		a.Add([]Log{podLog("j-s0-send", ReasonFailed, 100<<10, i)})
		check(fmt.Sprintf("failure %d", i))
	}
	recs := a.Index.Records
	if len(recs) != FailureBytes/PodBytes || recs[len(recs)-1].UID != "uid-j-s0-send-29" || !recs[0].Cut {
		t.Fatalf("after 30 failures: %d records, newest %s; want the newest %d, cut", len(recs), recs[len(recs)-1].UID, FailureBytes/PodBytes)
	}
	if a.Index.NotKept != 30-len(recs) {
		t.Errorf("not kept %d, want %d", a.Index.NotKept, 30-len(recs))
	}
	// The same pod again (a second pass before the deletion is seen) is not added twice.
	a.Add([]Log{podLog("j-s0-send", ReasonFailed, 100, 29)})
	if len(a.Index.Records) != len(recs) {
		t.Fatal("a pod archived twice")
	}
	// The job ends with a coordinator and 40 stripes: every pod gets an equal share of
	// the other half, none less than MinShareBytes; those that do not fit are counted.
	end := []Log{podLog("j-coordinator", ReasonFinished, 200<<10, 100)}
	for k := range 40 {
		end = append(end, podLog(fmt.Sprintf("j-s%d-send", k), ReasonFinished, 64<<10, 100), podLog(fmt.Sprintf("j-s%d-recv", k), ReasonFinished, 64<<10, 100))
	}
	failedBefore := a.bytes(ReasonFailed)
	a.Add(end)
	check("end of the job")
	if a.bytes(ReasonFailed) != failedBefore {
		t.Errorf("the end evicted failures: %d bytes of them left", a.bytes(ReasonFailed))
	}
	kept := a.Index.Records[len(recs)]
	if kept.Pod != "j-coordinator" || kept.Bytes < MinShareBytes-200 || !kept.Cut {
		t.Errorf("first kept of the end: %+v; want the coordinator, at least about %d bytes, cut", kept, MinShareBytes)
	}
	// A recurring job's next run ends: the earlier run's end makes room.
	a.Add([]Log{podLog("j-coordinator", ReasonFinished, 20<<10, 200)})
	check("the next run's end")
	last := a.Index.Records[len(a.Index.Records)-1]
	if last.UID != "uid-j-coordinator-200" || last.Bytes != 20<<10 || last.Cut {
		t.Errorf("next run's coordinator %+v: want its whole 20 KiB", last)
	}
	// What is written reads back the same.
	b, err := Decode(a.Data())
	if err != nil || len(b.Index.Records) != len(a.Index.Records) || b.Index.NotKept != a.Index.NotKept || b.Texts[last.Key] != a.Texts[last.Key] {
		t.Fatalf("round trip: %v", err)
	}
	if !strings.HasSuffix(last.Key, ".log") || last.Key == IndexKey {
		t.Errorf("text key %q", last.Key)
	}
}

func TestUnreadableLogIsRecorded(t *testing.T) {
	a, _ := Decode(map[string]string{})
	a.Add([]Log{{Record: Record{Pod: "j-s1-recv", UID: "u1", Reason: ReasonFailed, Time: t0, Error: "the kubelet did not answer"}}})
	if r := a.Index.Records; len(r) != 1 || r[0].Key != "" || r[0].Error == "" {
		t.Fatalf("records %+v: want the pod named with why its log is missing", r)
	}
	if _, err := Decode(map[string]string{IndexKey: "{"}); err == nil {
		t.Error("a damaged index was read without an error")
	}
}
