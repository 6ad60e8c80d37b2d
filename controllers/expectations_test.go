package controllers

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestExpectations walks the store through the lags it exists for.
func TestExpectations(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	e := newExpectations(clk)
	const job types.UID = "job"

	// A created pod is pending until the cache shows it.
	e.ExpectCreate(job, "p")
	e.Observe(job, nil)
	if !e.CreatePending(job, "p") {
		t.Fatal("creation settled before the cache showed the pod")
	}
	e.Observe(job, map[string]types.UID{"p": "uid-1"})
	if e.CreatePending(job, "p") {
		t.Fatal("creation still pending after the cache showed the pod")
	}

	// A deleted pod is ignored while the cache still shows it, and its absence is ours.
	e.ExpectDelete(job, "p", "uid-1")
	if !e.Deleted(job, "uid-1") || !e.RecentlyDeleted(job, "p") {
		t.Fatal("deletion not remembered")
	}
	// Re-created under the same name: the old pod, still cached, is not mistaken for it.
	e.ExpectCreate(job, "p")
	e.Observe(job, map[string]types.UID{"p": "uid-1"})
	if !e.CreatePending(job, "p") || e.RecentlyDeleted(job, "p") || !e.Deleted(job, "uid-1") {
		t.Fatal("the old pod settled the creation of its replacement")
	}
	e.Observe(job, map[string]types.UID{"p": "uid-2"})
	if e.CreatePending(job, "p") {
		t.Fatal("the replacement did not settle its creation")
	}

	// Everything expires.
	e.ExpectCreate(job, "q")
	e.ExpectDelete(job, "r", "uid-r")
	clk.SetTime(clk.Now().Add(expectationTimeout + time.Second))
	e.Observe(job, nil)
	if e.CreatePending(job, "q") || e.RecentlyDeleted(job, "r") || e.Deleted(job, "uid-r") {
		t.Fatal("expectations outlived their timeout")
	}

	// Status: the cache is stale while it shows the version our write replaced.
	e.StatusWritten(job, "100")
	if !e.StatusStale(job, "100") {
		t.Fatal("the replaced version was not seen as stale")
	}
	if e.StatusStale(job, "101") || e.StatusStale(job, "100") {
		t.Fatal("a newer version did not clear the expectation")
	}
	e.Forget(job)
	if e.CreatePending(job, "p") {
		t.Fatal("Forget kept state")
	}
}
