package api

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestSamplesAreAccepted applies config/samples/ as `kubectl apply -f config/samples/`
// does on a fresh cluster — every manifest, files in name order, nothing created
// beforehand — and every object is accepted.
func TestSamplesAreAccepted(t *testing.T) {
	ctx := context.Background()
	files, err := filepath.Glob(filepath.Join(samplesDir(), "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples found in %s: %v", samplesDir(), err)
	}
	sort.Strings(files) // kubectl's order
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		for _, obj := range readManifests(t, f) {
			t.Run(filepath.Base(f)+"/"+obj.GetName(), func(t *testing.T) {
				if err := env.Client.Create(ctx, obj.DeepCopy()); err != nil {
					t.Fatalf("sample rejected: %v", err)
				}
			})
		}
	}
}

func TestDefaultsAreApplied(t *testing.T) {
	ctx := context.Background()
	ensureNamespace(t, "defaults", nil)
	job := toUnstructured(validJob("defaults", "minimal"))
	if err := env.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"spec.tuning.mode":        "Auto",
		"spec.integrity.checksum": "BLAKE3",
		"spec.integrity.verify":   true,
		"spec.overwrite":          "IfDifferent",
		"spec.backoffLimit":       int64(6),
		"spec.suspend":            false,
	}
	for path, v := range want {
		got, found, err := unstructured.NestedFieldNoCopy(job.Object, strings.Split(path, ".")...)
		if err != nil || !found || got != v {
			t.Errorf("%s = %v (found %v, err %v), want default %v", path, got, found, err, v)
		}
	}
	ep := toUnstructured(validEndpoint("site-defaults"))
	if err := env.Client.Create(ctx, ep); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructured.NestedInt64(ep.Object, "spec", "maxStripesPerNode"); got != 4 {
		t.Errorf("spec.maxStripesPerNode = %d, want default 4", got)
	}
}

// TestReapplyIsNoOp is what GitOps tools rely on: applying the same manifests again,
// after the API server has defaulted them, changes nothing.
func TestReapplyIsNoOp(t *testing.T) {
	ctx := context.Background()
	ensureNamespace(t, "gitops", nil)
	files, _ := filepath.Glob(filepath.Join(samplesDir(), "dtnflow_*.yaml"))
	for _, f := range files {
		for _, obj := range readManifests(t, f) {
			obj.SetName("gitops-" + obj.GetName())
			if obj.GetNamespace() != "" {
				obj.SetNamespace("gitops")
			}
			t.Run(filepath.Base(f), func(t *testing.T) {
				first := obj.DeepCopy()
				if err := env.Client.Patch(ctx, first, client.Apply, client.FieldOwner("gitops"), client.ForceOwnership); err != nil {
					t.Fatalf("first apply: %v", err)
				}
				second := obj.DeepCopy()
				if err := env.Client.Patch(ctx, second, client.Apply, client.FieldOwner("gitops"), client.ForceOwnership); err != nil {
					t.Fatalf("second apply: %v", err)
				}
				if first.GetResourceVersion() != second.GetResourceVersion() || first.GetGeneration() != second.GetGeneration() {
					t.Fatalf("re-applying an unchanged manifest changed the object: resourceVersion %s -> %s, generation %d -> %d",
						first.GetResourceVersion(), second.GetResourceVersion(), first.GetGeneration(), second.GetGeneration())
				}
			})
		}
	}
}

// TestCRDsHaveNoFloats guards the API convention: rates are integers, coefficients are
// decimal strings.
func TestCRDsHaveNoFloats(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(samplesDir(), "..", "crd", "bases", "*.yaml"))
	if len(files) != 7 {
		t.Fatalf("want 7 CRDs, found %d", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "type: number") {
			t.Errorf("%s has a floating-point field (type: number)", filepath.Base(f))
		}
	}
}
