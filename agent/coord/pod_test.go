package coord

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dtnflow/dtnflow/agent/contract"
)

// TestPodChannel plays the API server: the coordinator GETs its own pod for the
// directive and merge-patches the report annotation, and nothing else.
func TestPodChannel(t *testing.T) {
	var mu sync.Mutex
	var calls []string
	var patch map[string]any
	directive := `{"generation":3,"mode":"Transfer","streamsPerStripe":8}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, r.Method+" "+r.URL.Path)
		w.Header().Set("Content-Type", "application/json")
		switch r.Method {
		case http.MethodGet:
			json.NewEncoder(w).Encode(map[string]any{"apiVersion": "v1", "kind": "Pod",
				"metadata": map[string]any{"name": "j-coordinator", "namespace": "ns", "annotations": map[string]string{contract.AnnotationDirective: directive}}})
		case http.MethodPatch:
			if ct := r.Header.Get("Content-Type"); ct != "application/merge-patch+json" {
				t.Errorf("patch content type %q", ct)
			}
			b, _ := io.ReadAll(r.Body)
			json.Unmarshal(b, &patch)
			w.Write([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j-coordinator","namespace":"ns"}}`))
		}
	}))
	defer srv.Close()
	ch, err := NewPodChannel(APIServer{Host: srv.URL}, "ns/j-coordinator")
	if err != nil {
		t.Fatal(err)
	}
	d, err := ch.Directive(context.Background())
	if err != nil || d == nil || d.Generation != 3 || d.StreamsPerStripe != 8 || d.Mode != contract.ModeTransfer {
		t.Fatalf("directive %+v, %v", d, err)
	}
	if err := ch.Publish(context.Background(), contract.Report{Phase: contract.PhaseTransferring, BytesDone: 42}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := "GET /api/v1/namespaces/ns/pods/j-coordinator,PATCH /api/v1/namespaces/ns/pods/j-coordinator"
	if strings.Join(calls, ",") != want {
		t.Fatalf("API calls %v, want %s", calls, want)
	}
	ann := patch["metadata"].(map[string]any)["annotations"].(map[string]any)[contract.AnnotationReport].(string)
	var rep contract.Report
	if err := json.Unmarshal([]byte(ann), &rep); err != nil || rep.BytesDone != 42 || rep.Phase != contract.PhaseTransferring {
		t.Fatalf("report annotation %q: %v", ann, err)
	}
}

// TestPodChannelInitialDirective: a coordinator started with the directive its pod was
// created with (contract.EnvInitialDirective) answers its first Directive call with it
// and asks the API server nothing; the next call reads the pod, whose newer directive
// wins.
func TestPodChannelInitialDirective(t *testing.T) {
	var mu sync.Mutex
	var calls []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls = append(calls, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": "j-coordinator", "namespace": "ns", "annotations": map[string]string{
				contract.AnnotationDirective: `{"generation":2,"mode":"Pause"}`}}})
	}))
	defer srv.Close()
	ch, err := NewPodChannel(APIServer{Host: srv.URL}, "ns/j-coordinator")
	if err != nil {
		t.Fatal(err)
	}
	initial, err := ParseInitialDirective(`{"generation":1,"mode":"Transfer","streamsPerStripe":1,"stripes":1}`)
	if err != nil || initial == nil {
		t.Fatalf("ParseInitialDirective: %+v, %v", initial, err)
	}
	ch.SetInitial(initial)
	d, err := ch.Directive(context.Background())
	if err != nil || d == nil || d.Generation != 1 || d.Mode != contract.ModeTransfer || d.StreamsPerStripe != 1 {
		t.Fatalf("first directive %+v, %v; want the initial one", d, err)
	}
	mu.Lock()
	if len(calls) != 0 {
		t.Fatalf("the initial directive cost API calls: %v", calls)
	}
	mu.Unlock()
	d, err = ch.Directive(context.Background())
	if err != nil || d == nil || d.Generation != 2 || d.Mode != contract.ModePause {
		t.Fatalf("second directive %+v, %v; want the pod's", d, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := "GET /api/v1/namespaces/ns/pods/j-coordinator"; strings.Join(calls, ",") != want {
		t.Fatalf("API calls %v, want %s", calls, want)
	}
}

// TestParseInitialDirective: an empty value (a pod created without a directive, or
// whose annotation was gone when the container started) is no directive; one that is
// not a directive is an error, so that the coordinator reads its pod instead.
func TestParseInitialDirective(t *testing.T) {
	for _, raw := range []string{"", "  ", "\n"} {
		if d, err := ParseInitialDirective(raw); d != nil || err != nil {
			t.Errorf("%q: %+v, %v; want nothing", raw, d, err)
		}
	}
	for _, raw := range []string{"{", "[]", `{"generation":"one"}`, "\xff\xfe"} {
		if d, err := ParseInitialDirective(raw); d != nil || err == nil {
			t.Errorf("%q: %+v, %v; want an error", raw, d, err)
		}
	}
}

// TestPodChannelWatch plays the API server's watch of the coordinator's pod: the watch
// asks for the pod by name, and a change of the directive annotation is signalled at
// once; an event that leaves it as it was is not.
func TestPodChannelWatch(t *testing.T) {
	events := make(chan string, 4)
	var query string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		query = r.URL.Path + "?" + r.URL.RawQuery
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		for {
			select {
			case ev := <-events:
				w.Write([]byte(ev + "\n"))
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	}))
	defer srv.Close()
	ch, err := NewPodChannel(APIServer{Host: srv.URL}, "ns/j-coordinator")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changed := ch.Watch(ctx)
	event := func(typ, directive string) string {
		b, _ := json.Marshal(map[string]any{"type": typ, "object": map[string]any{"metadata": map[string]any{"name": "j-coordinator",
			"annotations": map[string]string{contract.AnnotationDirective: directive, contract.AnnotationReport: "{}"}}}})
		return string(b)
	}
	expect := func(what string, want bool) {
		t.Helper()
		select {
		case <-changed:
			if !want {
				t.Fatalf("%s: signalled", what)
			}
		case <-time.After(map[bool]time.Duration{true: 10 * time.Second, false: 200 * time.Millisecond}[want]):
			if want {
				t.Fatalf("%s: no signal within 10 s", what)
			}
		}
	}
	events <- event("ADDED", `{"generation":1}`)
	expect("the pod as it is", true)
	events <- event("MODIFIED", `{"generation":1}`) // a new report, the same directive
	expect("a report written", false)
	events <- event("MODIFIED", `{"generation":2}`)
	expect("a new directive", true)
	mu.Lock()
	defer mu.Unlock()
	if want := "/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Dj-coordinator&watch=true"; query != want {
		t.Fatalf("watch request %s, want %s", query, want)
	}
}
