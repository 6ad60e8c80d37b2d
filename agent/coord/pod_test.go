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

	"k8s.io/client-go/rest"

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
	ch, err := NewPodChannel(&rest.Config{Host: srv.URL}, "ns/j-coordinator")
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
