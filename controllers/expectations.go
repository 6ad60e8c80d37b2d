package controllers

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// The controller reads from a cache that lags its own writes. Without care, a pass that
// runs before the cache shows a pod created by the pass before would create it again
// (refused: the name exists) or — worse — count it as vanished and charge the job a
// failure; a pass that still sees a pod it deleted would count its failure twice; and a
// pass that runs before the cache shows the status written by the pass before would act
// on old status. The expectations store remembers, per job, the pods it created or
// deleted and the status version it replaced, until the cache catches up. It is only a
// guard against lag: when it is lost (a restart) the caches start in sync, and
// everything it protects is read again from the API objects.

// expectationTimeout bounds how long an expectation is waited on; after it the cache
// is believed (the watch event may have been lost, or the write may never have landed).
const expectationTimeout = 5 * time.Minute

type jobExpectations struct {
	// creates maps the names of pods we created to when, until the cache shows them.
	creates map[string]time.Time
	// deletedNames maps the names of pods we deleted to when, until we create the name
	// again: the absence of such a pod is our doing, not a failure.
	deletedNames map[string]time.Time
	// deletedUIDs are the pods we deleted: the cache may show them for a moment
	// longer, even under a name we have created again.
	deletedUIDs map[types.UID]time.Time
	// replacedResourceVersion is the resourceVersion of the job before our last status
	// write; while the cache still shows it, the cache has not seen that write.
	replacedResourceVersion string
	replacedAt              time.Time
}

// expectations is the store; safe for concurrent use by several workers.
type expectations struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	jobs  map[types.UID]*jobExpectations
}

func newExpectations(c clock.PassiveClock) *expectations {
	return &expectations{clock: c, jobs: map[types.UID]*jobExpectations{}}
}

func (e *expectations) job(uid types.UID) *jobExpectations {
	j := e.jobs[uid]
	if j == nil {
		j = &jobExpectations{creates: map[string]time.Time{}, deletedNames: map[string]time.Time{}, deletedUIDs: map[types.UID]time.Time{}}
		e.jobs[uid] = j
	}
	return j
}

// ExpectCreate records that the pod name was created for the job.
func (e *expectations) ExpectCreate(job types.UID, name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	j := e.job(job)
	delete(j.deletedNames, name)
	j.creates[name] = e.clock.Now()
}

// ExpectDelete records that the pod name (UID pod) was deleted for the job.
func (e *expectations) ExpectDelete(job types.UID, name string, pod types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	j := e.job(job)
	now := e.clock.Now()
	delete(j.creates, name)
	j.deletedNames[name] = now
	j.deletedUIDs[pod] = now
}

// Observe settles the job's expectations against the pods the cache shows (name →
// UID): a creation is settled once a pod of that name shows that we did not delete.
// Deletions are remembered until the name is created again or the timeout passes.
func (e *expectations) Observe(job types.UID, present map[string]types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	j := e.jobs[job]
	if j == nil {
		return
	}
	now := e.clock.Now()
	for uid, at := range j.deletedUIDs {
		if now.Sub(at) > expectationTimeout {
			delete(j.deletedUIDs, uid)
		}
	}
	for name, at := range j.deletedNames {
		if now.Sub(at) > expectationTimeout {
			delete(j.deletedNames, name)
		}
	}
	for name, at := range j.creates {
		uid, ok := present[name]
		if (ok && !hasUID(j.deletedUIDs, uid)) || now.Sub(at) > expectationTimeout {
			delete(j.creates, name)
		}
	}
}

func hasUID(m map[types.UID]time.Time, uid types.UID) bool {
	_, ok := m[uid]
	return ok
}

// CreatePending says whether the job created the pod and the cache does not show it yet.
func (e *expectations) CreatePending(job types.UID, name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	j := e.jobs[job]
	if j == nil {
		return false
	}
	_, ok := j.creates[name]
	return ok
}

// Deleted says whether the pod (by UID) is one the job deleted: the cache may still
// show it, but it is on its way out.
func (e *expectations) Deleted(job types.UID, pod types.UID) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	j := e.jobs[job]
	return j != nil && hasUID(j.deletedUIDs, pod)
}

// RecentlyDeleted says whether the job deleted a pod of this name and has not created
// the name since: its absence is no failure.
func (e *expectations) RecentlyDeleted(job types.UID, name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	j := e.jobs[job]
	if j == nil {
		return false
	}
	_, ok := j.deletedNames[name]
	return ok
}

// StatusWritten records that a status write replaced the job at resourceVersion rv.
func (e *expectations) StatusWritten(job types.UID, rv string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	j := e.job(job)
	j.replacedResourceVersion, j.replacedAt = rv, e.clock.Now()
}

// StatusStale says whether the cached job at resourceVersion rv is one our last status
// write replaced, so that acting on it would repeat the last pass.
func (e *expectations) StatusStale(job types.UID, rv string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	j := e.jobs[job]
	if j == nil || j.replacedResourceVersion == "" {
		return false
	}
	if j.replacedResourceVersion != rv || e.clock.Now().Sub(j.replacedAt) > expectationTimeout {
		j.replacedResourceVersion = ""
		return false
	}
	return true
}

// Forget drops everything about a job (it is gone).
func (e *expectations) Forget(job types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.jobs, job)
}
