package coord

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dtnflow/dtnflow/agent/contract"
)

// Channel is how a coordinator hears from and answers to whoever runs it: the
// controller through its own pod's annotations, or nobody (standalone).
type Channel interface {
	// Directive returns the current directive, or nil if there is none.
	Directive(ctx context.Context) (*contract.Directive, error)
	// Publish publishes a report.
	Publish(ctx context.Context, r contract.Report) error
}

// PodChannel reads the directive from the annotation contract.AnnotationDirective of
// the coordinator's own pod (GET) and writes reports to contract.AnnotationReport (a
// merge patch). These two calls are all the API access a coordinator needs, so they
// are made directly over an authenticated HTTP client (APIServer), without client-go.
type PodChannel struct {
	Namespace, Name string
	url             string
	// watchURL watches the pod: the collection with a field selector on its name,
	// which the API server authorizes against resourceNames like a GET of the pod.
	watchURL string
	client   *http.Client

	// initial is the directive the pod was created with (contract.EnvInitialDirective),
	// returned by the first Directive call without asking the API server.
	initial atomic.Pointer[contract.Directive]
}

// SetInitial makes d the answer of the next Directive call, which then asks the API
// server nothing; the calls after it read the pod.
func (p *PodChannel) SetInitial(d *contract.Directive) { p.initial.Store(d) }

// ParseInitialDirective reads the directive a coordinator pod was created with from
// the value of contract.EnvInitialDirective: nil for an empty value (a pod created
// without one, or whose annotation was gone when its container started).
func ParseInitialDirective(raw string) (*contract.Directive, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	return decodeDirective([]byte(raw), contract.EnvInitialDirective)
}

// decodeDirective decodes a directive's JSON, naming where it came from in an error.
func decodeDirective(b []byte, from string) (*contract.Directive, error) {
	var d contract.Directive
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", from, err)
	}
	return &d, nil
}

// NewPodChannel builds a PodChannel for pod "namespace/name" on api (InClusterAPI in a
// pod).
func NewPodChannel(api APIServer, pod string) (*PodChannel, error) {
	ns, name, ok := strings.Cut(pod, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return nil, fmt.Errorf("--pod %q: want namespace/name", pod)
	}
	hc, err := api.client()
	if err != nil {
		return nil, err
	}
	host := strings.TrimSuffix(api.Host, "/")
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	pods := host + "/api/v1/namespaces/" + url.PathEscape(ns) + "/pods"
	w := pods + "?" + url.Values{"watch": {"true"}, "fieldSelector": {"metadata.name=" + name}}.Encode()
	return &PodChannel{Namespace: ns, Name: name, url: pods + "/" + url.PathEscape(name), watchURL: w, client: hc}, nil
}

func (p *PodChannel) do(ctx context.Context, method string, body []byte, contentType string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, p.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s %s: %s: %s", method, p.url, resp.Status, strings.TrimSpace(string(b)))
	}
	return b, nil
}

// Directive implements Channel.
func (p *PodChannel) Directive(ctx context.Context) (*contract.Directive, error) {
	if initial := p.initial.Swap(nil); initial != nil {
		return initial, nil
	}
	b, err := p.do(ctx, http.MethodGet, nil, "")
	if err != nil {
		return nil, fmt.Errorf("reading pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	var pod struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(b, &pod); err != nil {
		return nil, fmt.Errorf("reading pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	raw, ok := pod.Metadata.Annotations[contract.AnnotationDirective]
	if !ok || raw == "" {
		return nil, nil
	}
	return decodeDirective([]byte(raw), fmt.Sprintf("annotation %s of pod %s/%s", contract.AnnotationDirective, p.Namespace, p.Name))
}

// Publish implements Channel.
func (p *PodChannel) Publish(ctx context.Context, r contract.Report) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{contract.AnnotationReport: string(b)}}})
	if _, err := p.do(ctx, http.MethodPatch, patch, "application/merge-patch+json"); err != nil {
		return fmt.Errorf("patching pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// LogChannel is the standalone Channel: directives from a file (or none) and reports
// to the log.
type LogChannel struct {
	// DirectiveFile, when set, holds a contract.Directive as JSON, read every report
	// interval: the annotation of a coordinator pod, without Kubernetes.
	DirectiveFile string
	Log           *slog.Logger
}

// Directive implements Channel.
func (l *LogChannel) Directive(context.Context) (*contract.Directive, error) {
	if l.DirectiveFile == "" {
		return nil, nil
	}
	b, err := os.ReadFile(l.DirectiveFile)
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(bytes.TrimSpace(b)) == 0) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return decodeDirective(b, "--directive-file "+l.DirectiveFile)
}

// Publish implements Channel.
func (l *LogChannel) Publish(_ context.Context, r contract.Report) error {
	pct := int64(0)
	if r.BytesTotal > 0 {
		pct = r.BytesDone * 100 / r.BytesTotal
	}
	l.Log.Info("Progress", "phase", r.Phase, "percent", pct, "bytes", r.BytesDone, "bytesTotal", r.BytesTotal,
		"files", r.FilesDone, "filesTotal", r.FilesTotal, "rate", HumanRate(r.BitsPerSecond), "stripes", len(r.Stripes), "error", r.Error)
	return nil
}

// HumanRate formats bits per second for people.
func HumanRate(bps int64) string {
	switch {
	case bps >= 1e9:
		return fmt.Sprintf("%.2f Gbit/s", float64(bps)/1e9)
	case bps >= 1e6:
		return fmt.Sprintf("%.1f Mbit/s", float64(bps)/1e6)
	default:
		return fmt.Sprintf("%d kbit/s", bps/1000)
	}
}

// Watch implements Watcher: it watches the pod and sends after every event that
// changes the directive annotation (the first event, the pod as it is, included), so
// that the Runner reads a new directive at once. A watch that ends or fails is opened
// again after a pause that grows to 5 s; meanwhile the Runner's report interval reads
// the directive anyway.
func (p *PodChannel) Watch(ctx context.Context) <-chan struct{} {
	out := make(chan struct{}, 1)
	go func() {
		last := ""
		p.follow(ctx, func(_ string, annotations map[string]string) bool {
			if d := annotations[contract.AnnotationDirective]; d != last {
				last = d
				select {
				case out <- struct{}{}:
				default: // one is pending already: the Runner reads the latest
				}
			}
			return false
		})
	}()
	return out
}

// WaitFor watches the pod until accept takes one of its states (its UID and
// annotations, the first event the pod as it is), and returns accept's error then; nil
// when ctx ends first. A watch that ends or fails is opened again after a pause that
// grows to 5 s.
func (p *PodChannel) WaitFor(ctx context.Context, accept func(uid string, annotations map[string]string) (bool, error)) error {
	var err error
	p.follow(ctx, func(uid string, annotations map[string]string) bool {
		var done bool
		done, err = accept(uid, annotations)
		return done
	})
	return err
}

// follow watches the pod and calls each with every state of it the watch delivers,
// until each says it is done or ctx ends.
func (p *PodChannel) follow(ctx context.Context, each func(uid string, annotations map[string]string) bool) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		seen, done, err := p.watchOnce(ctx, each)
		if done || ctx.Err() != nil {
			return
		}
		if seen {
			backoff = 100 * time.Millisecond
		}
		if err != nil {
			slog.Default().Debug("Watching the agent's pod", "err", err.Error())
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// watchOnce follows one watch until it ends or each is done; seen says it delivered an
// event.
func (p *PodChannel) watchOnce(ctx context.Context, each func(uid string, annotations map[string]string) bool) (seen, done bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.watchURL, nil)
	if err != nil {
		return false, false, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return false, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return false, false, fmt.Errorf("watching pod %s/%s: %s: %s", p.Namespace, p.Name, resp.Status, strings.TrimSpace(string(b)))
	}
	dec := json.NewDecoder(resp.Body)
	for {
		var ev struct {
			Type   string `json:"type"`
			Object struct {
				Metadata struct {
					Name        string            `json:"name"`
					UID         string            `json:"uid"`
					Annotations map[string]string `json:"annotations"`
				} `json:"metadata"`
			} `json:"object"`
		}
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) {
				return seen, false, nil
			}
			return seen, false, err
		}
		seen = true
		if ev.Type != "ADDED" && ev.Type != "MODIFIED" || ev.Object.Metadata.Name != p.Name {
			continue // ERROR (an expired watch), BOOKMARK, DELETED: nothing to read
		}
		if each(ev.Object.Metadata.UID, ev.Object.Metadata.Annotations) {
			return true, true, nil
		}
	}
}
