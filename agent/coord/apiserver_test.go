package coord

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestInClusterAPI(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
	getenv := func(k string) string { return env[k] }
	if _, err := inClusterAPI(getenv, dir); err == nil || !strings.Contains(err.Error(), "service account token") {
		t.Fatalf("no token mounted: got %v, want an error about the token", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := inClusterAPI(getenv, dir)
	if err != nil {
		t.Fatal(err)
	}
	want := APIServer{Host: "https://[fd00::1]:443", CAFile: dir + "/ca.crt", TokenFile: dir + "/token"}
	if a != want {
		t.Fatalf("got %+v, want %+v", a, want)
	}
	delete(env, "KUBERNETES_SERVICE_PORT")
	if _, err := inClusterAPI(getenv, dir); err == nil || !strings.Contains(err.Error(), "KUBERNETES_SERVICE_PORT") {
		t.Fatalf("outside a pod: got %v, want an error naming the variables", err)
	}
}

// TestAPIServerTrustsItsCAAndPresentsTheToken plays a TLS API server: the pod's
// channel reaches it only through the CA file, with the token file's token, and reads
// the file again once its token is a minute old.
func TestAPIServerTrustsItsCAAndPresentsTheToken(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		json.NewEncoder(w).Encode(map[string]any{"metadata": map[string]any{"name": "p"}})
	}))
	defer srv.Close()
	dir := t.TempDir()
	ca, token := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "token")
	write := func(name string, b []byte) {
		t.Helper()
		if err := os.WriteFile(name, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	write(token, []byte("first\n"))
	ctx := context.Background()

	untrusted, err := NewPodChannel(APIServer{Host: srv.URL, TokenFile: token}, "ns/p")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := untrusted.Directive(ctx); err == nil {
		t.Fatal("a server the system's roots do not sign was trusted without the CA file")
	}

	ch, err := NewPodChannel(APIServer{Host: srv.URL, CAFile: ca, TokenFile: token}, "ns/p")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	ch.client.Transport.(*bearerFromFile).now = func() time.Time { return now }
	read := func() {
		t.Helper()
		if _, err := ch.Directive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	read()
	write(token, []byte("second"))
	now = now.Add(tokenReread - time.Second)
	read() // within the minute: the token read before
	now = now.Add(time.Second)
	read() // a minute old: read again
	write(token, nil)
	now = now.Add(tokenReread)
	read() // the file emptied while the kubelet replaces it: the last token stays
	mu.Lock()
	defer mu.Unlock()
	want := "Bearer first,Bearer first,Bearer second,Bearer second"
	if got := strings.Join(seen, ","); got != want {
		t.Fatalf("the server saw %s, want %s", got, want)
	}
}

func TestAPIServerRefusesACAFileWithoutCertificates(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewPodChannel(APIServer{Host: "https://127.0.0.1:1", CAFile: ca}, "ns/p"); err == nil || !strings.Contains(err.Error(), ca) {
		t.Fatalf("got %v, want an error naming %s", err, ca)
	}
}
