package api

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/dtnflow/dtnflow/test/integration/framework"
)

// object is a manifest as a map, so that a test can remove a field entirely or set it to
// a value of the wrong type, which typed Go structs cannot express.
type object = map[string]any

func validEndpoint(name string) object {
	return object{
		"apiVersion": "dtnflow.io/v1alpha1",
		"kind":       "TransferEndpoint",
		"metadata":   object{"name": name},
		"spec": object{
			"nodeSelector":      object{"dtnflow.io/site": name},
			"storage":           object{"hostPath": "/srv/dtn"},
			"nicBitsPerSecond":  int64(10_000_000_000),
			"namespaceSelector": object{},
		},
	}
}

func validJob(namespace, name string) object {
	return object{
		"apiVersion": "dtnflow.io/v1alpha1",
		"kind":       "TransferJob",
		"metadata":   object{"name": name, "namespace": namespace},
		"spec": object{
			"source":      object{"endpoint": "site-a", "paths": []any{"runs/0427/raw", "runs/0427/calibration.h5"}},
			"destination": object{"endpoint": "site-b", "path": "incoming"},
		},
	}
}

// set writes value at the dotted path, creating maps on the way. A segment may index a
// list that exists, as in "status.conditions[0].reason".
func set(obj object, path string, value any) {
	parent, last := walkTo(obj, path, true)
	name, index := splitIndex(last)
	if index < 0 {
		parent[name] = value
		return
	}
	parent[name].([]any)[index] = value
}

// del removes the field at the dotted path.
func del(obj object, path string) {
	parent, last := walkTo(obj, path, false)
	delete(parent, last)
}

// walkTo returns the map that holds the last segment of path, and that segment.
func walkTo(obj object, path string, create bool) (object, string) {
	parts := strings.Split(path, ".")
	m := obj
	for _, p := range parts[:len(parts)-1] {
		name, index := splitIndex(p)
		if index >= 0 {
			m = m[name].([]any)[index].(object)
			continue
		}
		next, ok := m[name].(object)
		if !ok {
			if !create {
				panic("no field " + name + " in " + path)
			}
			next = object{}
			m[name] = next
		}
		m = next
	}
	return m, parts[len(parts)-1]
}

// splitIndex splits "name[3]" into "name" and 3; a segment without an index gives -1.
func splitIndex(segment string) (string, int) {
	open := strings.IndexByte(segment, '[')
	if open < 0 || !strings.HasSuffix(segment, "]") {
		return segment, -1
	}
	i, err := strconv.Atoi(segment[open+1 : len(segment)-1])
	if err != nil {
		panic("bad index in " + segment)
	}
	return segment[:open], i
}

// listOf returns n items made by item.
func listOf(n int, item func(i int) any) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = item(i)
	}
	return out
}

// mapOf returns n entries made by entry.
func mapOf(n int, entry func(i int) (string, any)) object {
	out := object{}
	for i := 0; i < n; i++ {
		k, v := entry(i)
		out[k] = v
	}
	return out
}

// dnsName returns a valid DNS subdomain of exactly n characters (labels of at most 63).
func dnsName(n int) string {
	var b strings.Builder
	for {
		rest := n - b.Len()
		label := min(63, rest)
		if rest-label == 1 { // no room may be left for a '.' with nothing after it
			label--
		}
		b.WriteString(strings.Repeat("d", label))
		if b.Len() == n {
			return b.String()
		}
		b.WriteByte('.')
	}
}

func toUnstructured(obj object) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: deepCopy(obj).(object)}
}

func deepCopy(v any) any {
	switch t := v.(type) {
	case object:
		out := object{}
		for k, e := range t {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = deepCopy(e)
		}
		return out
	default:
		return v
	}
}

// readManifests decodes every YAML document of a file into unstructured objects.
func readManifests(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if err.Error() == "EOF" {
				break
			}
			t.Fatalf("decoding %s: %v", path, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	return out
}

func samplesDir() string { return filepath.Join(framework.RepoRoot(), "config", "samples") }

// ensureNamespace creates a namespace for a test, labelled as given.
func ensureNamespace(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	ns := &unstructured.Unstructured{Object: object{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": object{"name": name},
	}}
	ns.SetLabels(labels)
	if err := env.Client.Create(context.Background(), ns); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
}
