package main

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/test/e2e/framework"
)

// countingGets counts the reads a follower makes: one, then the watch's events. It
// closes watching once the follower's watch is up: the fake client's watch starts from
// now, whatever resource version it is asked for (an API server replays the changes
// since that version), so a change made between the read and the watch would be lost
// to the fake alone, and the test makes its changes only once the watch is there.
type countingGets struct {
	client.WithWatch
	gets     atomic.Int32
	watching chan struct{}
	once     sync.Once
}

func (c *countingGets) Watch(ctx context.Context, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
	w, err := c.WithWatch.Watch(ctx, list, opts...)
	if err == nil {
		c.once.Do(func() { close(c.watching) })
	}
	return w, err
}

func (c *countingGets) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.gets.Add(1)
	return c.WithWatch.Get(ctx, key, obj, opts...)
}

// TestFollowJobSeesEveryStateToTheEnd: the follower hands over each state the job
// passes through as the watch announces it (one read, then no polling), and returns
// once it is Complete.
func TestFollowJobSeesEveryStateToTheEnd(t *testing.T) {
	job := &dtnflowv1alpha1.TransferJob{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "bench"}}
	wc := fake.NewClientBuilder().WithScheme(framework.Scheme()).WithObjects(job).WithStatusSubresource(job).Build()
	follower := &countingGets{WithWatch: wc, watching: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seen := make(chan dtnflowv1alpha1.TransferState, 16)
	done := make(chan error, 1)
	go func() {
		done <- followJob(ctx, follower, client.ObjectKeyFromObject(job), func(j *dtnflowv1alpha1.TransferJob, _ time.Time) { seen <- j.Status.State })
	}()
	if s := <-seen; s != "" {
		t.Fatalf("first version's state %q, want the new job's (empty)", s)
	}
	select {
	case <-follower.watching:
	case <-ctx.Done():
		t.Fatal("the follower never watched the job after its first read")
	}
	for _, state := range []dtnflowv1alpha1.TransferState{dtnflowv1alpha1.StateTransferring, dtnflowv1alpha1.StateComplete} {
		var cur dtnflowv1alpha1.TransferJob
		if err := wc.Get(ctx, client.ObjectKeyFromObject(job), &cur); err != nil {
			t.Fatal(err)
		}
		cur.Status.State = state
		if err := wc.Status().Update(ctx, &cur); err != nil {
			t.Fatal(err)
		}
		select {
		case s := <-seen:
			if s != state {
				t.Fatalf("saw %q, want %q", s, state)
			}
		case <-ctx.Done():
			t.Fatalf("%s was never seen", state)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("followJob: %v, want nil once the job is Complete", err)
	}
	if n := follower.gets.Load(); n != 1 {
		t.Errorf("%d reads, want 1: the states after the first come from the watch", n)
	}
}
