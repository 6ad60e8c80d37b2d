package wanem

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

// Controllable is what the control API serves: a running link (or anything that keeps
// a Config and counts like one).
type Controllable interface {
	Config() Config
	Update(func(*Config)) (Config, error)
	Stats() Stats
}

// ControlHandler serves a link's configuration and counters over HTTP:
//
//	GET   /config  the configuration (JSON, durations as "25ms")
//	PATCH /config  a partial update, e.g. {"aToB":{"rateBitsPerSecond":500000000}} or
//	               {"both":{"delay":"10ms","loss":0.001}}; answers the new configuration
//	               (PUT and POST are accepted as synonyms)
//	GET   /stats   the counters
//
// A bad update is refused with 400 and a message naming the field.
func ControlHandler(l Controllable) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /config", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, l.Config())
	})
	update := func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var decodeErr error
		cfg, err := l.Update(func(c *Config) {
			// Decode onto a copy: a document that fails half-way changes nothing.
			next := *c
			if decodeErr = json.Unmarshal(body, &next); decodeErr == nil {
				*c = next
			}
		})
		if decodeErr != nil {
			http.Error(w, "config: "+decodeErr.Error(), http.StatusBadRequest)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, http.StatusOK, cfg)
	}
	mux.HandleFunc("PATCH /config", update)
	mux.HandleFunc("PUT /config", update)
	mux.HandleFunc("POST /config", update)
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, l.Stats())
	})
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// ServeControl serves ControlHandler(l) on a unix socket at path (replacing a stale
// socket file) until ctx ends. It returns once the socket listens; the socket file is
// removed when serving stops.
func ServeControl(ctx context.Context, path string, l Controllable) error {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		// A socket left by a process that died; a live one would refuse the dial.
		if c, err := net.DialTimeout("unix", path, 200*time.Millisecond); err == nil {
			c.Close()
			return fmt.Errorf("control socket %s: another emulator is listening", path)
		}
		_ = os.Remove(path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	srv := &http.Server{Handler: ControlHandler(l), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() { _ = srv.Serve(ln) }()
	return nil
}

// ControlClient talks to a link's control socket.
type ControlClient struct {
	socket string
	http   *http.Client
}

// NewControlClient is a client of the control socket at path.
func NewControlClient(path string) *ControlClient {
	return &ControlClient{socket: path, http: &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}},
	}}
}

// Config fetches the link's configuration.
func (c *ControlClient) Config(ctx context.Context) (Config, error) {
	var cfg Config
	return cfg, c.do(ctx, http.MethodGet, "/config", nil, &cfg)
}

// Stats fetches the link's counters.
func (c *ControlClient) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	return st, c.do(ctx, http.MethodGet, "/stats", nil, &st)
}

// Update sends a partial update (see ControlHandler) and returns the new configuration.
// patch is marshalled to JSON: a map, a raw JSON message, or a Config (which is then
// a complete replacement).
func (c *ControlClient) Update(ctx context.Context, patch any) (Config, error) {
	b, err := json.Marshal(patch)
	if err != nil {
		return Config{}, err
	}
	var cfg Config
	return cfg, c.do(ctx, http.MethodPatch, "/config", b, &cfg)
}

func (c *ControlClient) do(ctx context.Context, method, path string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://wanem"+path, rd)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("control socket %s: %w", c.socket, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return errors.New(string(bytes.TrimSpace(b)))
	}
	return json.Unmarshal(b, out)
}
