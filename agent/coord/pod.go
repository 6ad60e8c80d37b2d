package coord

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

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
// merge patch). These two calls are all the API access a coordinator needs.
type PodChannel struct {
	Namespace, Name string
	pods            corev1client.PodInterface
}

// NewPodChannel builds a PodChannel for pod "namespace/name" from cfg (use
// rest.InClusterConfig in a pod).
func NewPodChannel(cfg *rest.Config, pod string) (*PodChannel, error) {
	ns, name, ok := strings.Cut(pod, "/")
	if !ok || ns == "" || name == "" {
		return nil, fmt.Errorf("--pod %q: want namespace/name", pod)
	}
	cs, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &PodChannel{Namespace: ns, Name: name, pods: cs.Pods(ns)}, nil
}

// Directive implements Channel.
func (p *PodChannel) Directive(ctx context.Context) (*contract.Directive, error) {
	pod, err := p.pods.Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	raw, ok := pod.Annotations[contract.AnnotationDirective]
	if !ok || raw == "" {
		return nil, nil
	}
	var d contract.Directive
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		return nil, fmt.Errorf("annotation %s of pod %s/%s: %w", contract.AnnotationDirective, p.Namespace, p.Name, err)
	}
	return &d, nil
}

// Publish implements Channel.
func (p *PodChannel) Publish(ctx context.Context, r contract.Report) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{contract.AnnotationReport: string(b)}}})
	_, err = p.pods.Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("patching pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// LogChannel is the standalone Channel: a fixed directive (or none) and reports to the
// log.
type LogChannel struct {
	Fixed *contract.Directive
	Log   *slog.Logger
}

// Directive implements Channel.
func (l *LogChannel) Directive(context.Context) (*contract.Directive, error) { return l.Fixed, nil }

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
