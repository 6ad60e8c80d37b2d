package coord

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// APIServer is how an agent in a pod reaches the Kubernetes API: the API server's
// address, the CA that signs its certificate and the service account token the agent
// presents. A pod's agent makes two kinds of call (its own pod's GET and watch, and a
// merge patch of its annotations, PodChannel), so it carries this small client rather
// than client-go: linking client-go (its API types, serializers and their package
// initialisers) made every start of the agent 4–5 ms slower, paid by every
// `dtnflow-agent send` and by every pod's first byte (docs/benchmarks.md).
type APIServer struct {
	// Host is the API server's URL, "https://host:port".
	Host string
	// CAFile is a PEM bundle of the CAs the API server's certificate must chain to;
	// empty trusts the system's roots.
	CAFile string
	// TokenFile holds the bearer token; empty sends none. The kubelet rotates a
	// projected service account token in place, so the file is read again at least
	// every tokenReread.
	TokenFile string
}

// serviceAccountDir is where Kubernetes mounts a pod's service account credentials.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// tokenReread is how long a token read from TokenFile is used before the file is read
// again: the kubelet renews a projected token when 80 % of its lifetime (an hour at
// least) has passed, so a token read a minute ago is still valid.
const tokenReread = time.Minute

// InClusterAPI is the API server of the cluster the agent's pod runs in, from the
// environment Kubernetes gives every container and the mounted service account.
func InClusterAPI() (APIServer, error) {
	return inClusterAPI(os.Getenv, serviceAccountDir)
}

func inClusterAPI(getenv func(string) string, saDir string) (APIServer, error) {
	host, port := getenv("KUBERNETES_SERVICE_HOST"), getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return APIServer{}, errors.New("not running in a pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set")
	}
	a := APIServer{Host: "https://" + net.JoinHostPort(host, port), CAFile: saDir + "/ca.crt", TokenFile: saDir + "/token"}
	if _, err := os.ReadFile(a.TokenFile); err != nil {
		return APIServer{}, fmt.Errorf("reading the pod's service account token: %w", err)
	}
	return a, nil
}

// client is an HTTP client that trusts CAFile and presents TokenFile's token.
func (a APIServer) client() (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone() // proxies from the environment, HTTP/2
	if a.CAFile != "" {
		pem, err := os.ReadFile(a.CAFile)
		if err != nil {
			return nil, fmt.Errorf("reading the API server's CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("the API server's CA file %s holds no PEM certificate", a.CAFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	var rt http.RoundTripper = tr
	if a.TokenFile != "" {
		rt = &bearerFromFile{next: tr, file: a.TokenFile, now: time.Now}
	}
	return &http.Client{Transport: rt}, nil
}

// bearerFromFile adds "Authorization: Bearer <token>" to each request, the token read
// from file and read again once it is tokenReread old. A failed read keeps the token
// it had (the file is being replaced; the old token is still valid for a while).
type bearerFromFile struct {
	next http.RoundTripper
	file string
	now  func() time.Time

	mu     sync.Mutex
	token  string
	readAt time.Time
}

func (b *bearerFromFile) current() (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.token != "" && b.now().Sub(b.readAt) < tokenReread {
		return b.token, nil
	}
	raw, err := os.ReadFile(b.file)
	tok := strings.TrimSpace(string(raw))
	switch {
	case err == nil && tok != "":
		b.token, b.readAt = tok, b.now()
	case b.token == "" && err == nil:
		return "", fmt.Errorf("the service account token file %s is empty", b.file)
	case b.token == "":
		return "", fmt.Errorf("reading the service account token: %w", err)
	}
	return b.token, nil
}

// RoundTrip implements http.RoundTripper.
func (b *bearerFromFile) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := b.current()
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	r := req.Clone(req.Context()) // a RoundTripper must not change the caller's request
	r.Header.Set("Authorization", "Bearer "+tok)
	return b.next.RoundTrip(r)
}
