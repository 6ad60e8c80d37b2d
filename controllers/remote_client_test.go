package controllers

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// TestRemoteWatchStartsOnceTheManagerRuns: a site's client made before the manager's
// Start (a first pass can come first) gets its watch at the next use once Start has
// run, and only one; a new credential replaces the watch.
func TestRemoteWatchStartsOnceTheManagerRuns(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := dtnflowv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "dtnflow-system", Name: "site-b-kubeconfig", ResourceVersion: "1"},
		Data: map[string][]byte{KubeconfigKey: []byte("kubeconfig")}}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(secret).Build()
	c := newRemoteClients(reader, scheme, "dtnflow-system")
	c.newClient = func([]byte, *runtime.Scheme) (client.Client, error) { return reader, nil }
	watches := 0
	c.newWatcher = func([]byte, *runtime.Scheme) (client.WithWatch, error) {
		watches++
		return fake.NewClientBuilder().WithScheme(scheme).Build(), nil
	}
	site := &dtnflowv1alpha1.RemoteSite{ObjectMeta: metav1.ObjectMeta{Name: "site-b", Generation: 1},
		Spec: dtnflowv1alpha1.RemoteSiteSpec{KubeconfigSecret: secret.Name, Namespace: "peer-site-a"}}
	ctx, stop := context.WithCancel(context.Background())
	defer stop() // ends the watch
	if _, err := c.get(ctx, site); err != nil {
		t.Fatal(err)
	}
	if watches != 0 {
		t.Fatalf("a watch was made before the manager's Start: %d", watches)
	}
	c.mu.Lock()
	c.runCtx = ctx // what Start does
	c.mu.Unlock()
	for range 3 {
		if _, err := c.get(ctx, site); err != nil {
			t.Fatal(err)
		}
	}
	if watches != 1 {
		t.Fatalf("%d watches after three uses once the manager ran, want 1", watches)
	}
	// a new credential: the old watch stops, a new one starts
	secret.Data[KubeconfigKey] = []byte("kubeconfig, renewed")
	if err := reader.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if _, err := c.get(ctx, site); err != nil {
		t.Fatal(err)
	}
	if watches != 2 {
		t.Fatalf("%d watches after the credential changed, want 2", watches)
	}
}
