package mover

import (
	"reflect"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/dtnflow/dtnflow/agent/wire"
)

// TestManifestQueriesOfARunShareOneBuild: the queries of one run that arrive while its
// manifest is being built get that build's parts (the debris it removed counted once,
// in the builder's answer); a query of another run, one without a run and one that
// comes after the build finished each look afresh; a query whose session ends while it
// waits returns at once.
func TestManifestQueriesOfARunShareOneBuild(t *testing.T) {
	g := NewWithT(t)
	j := &rjob{}
	q := wire.ManifestQuery{Run: "run-1", Packed: true}
	var builds atomic.Int32
	release := make(chan struct{})
	manifest := []wire.Manifest{{Files: []wire.ManifestFile{{Path: "a", Size: 1}}}, {Files: []wire.ManifestFile{{Path: "b", Size: 2}}, Debris: 2, Last: true}}
	build := func() []wire.Manifest {
		builds.Add(1)
		<-release
		return manifest
	}
	type answer struct {
		parts []wire.Manifest
		ok    bool
	}
	ask := func(q wire.ManifestQuery, gone <-chan struct{}) <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			parts, ok := j.sharedManifest(q, gone, build)
			ch <- answer{parts, ok}
		}()
		return ch
	}
	waiting := func() int {
		j.manifestMu.Lock()
		defer j.manifestMu.Unlock()
		if b := j.manifests[q]; b != nil {
			return b.waiting
		}
		return -1
	}

	builder := ask(q, nil)
	g.Eventually(waiting).Should(Equal(0), "the first query builds")
	joiners := []<-chan answer{ask(q, nil), ask(q, nil), ask(q, nil)}
	ended := make(chan struct{})
	leaver := ask(q, ended)
	g.Eventually(waiting).Should(Equal(4))
	close(ended)
	g.Eventually(leaver).Should(Receive(Equal(answer{nil, false})), "a query whose session ended waits no longer")

	// Another run's query, and one without a run, are not this build's.
	other := make(chan struct{})
	otherBuild := func() []wire.Manifest { close(other); return []wire.Manifest{{Last: true}} }
	if parts, ok := j.sharedManifest(wire.ManifestQuery{Run: "run-2", Packed: true}, nil, otherBuild); !ok || len(parts) != 1 {
		t.Fatalf("another run's query: %v %v", parts, ok)
	}
	g.Expect(other).To(BeClosed())
	noRun := 0
	j.sharedManifest(wire.ManifestQuery{Packed: true}, nil, func() []wire.Manifest { noRun++; return nil })
	g.Expect(noRun).To(Equal(1), "a query without a run looks for itself")

	close(release)
	var first answer
	g.Eventually(builder).Should(Receive(&first))
	g.Expect(first.ok).To(BeTrue())
	g.Expect(first.parts).To(Equal(manifest), "the builder's answer, its debris included")
	withoutDebris := []wire.Manifest{manifest[0], {Files: manifest[1].Files, Last: true}}
	for i, ch := range joiners {
		var a answer
		g.Eventually(ch).Should(Receive(&a))
		if !a.ok || !reflect.DeepEqual(a.parts, withoutDebris) {
			t.Errorf("query %d waiting for the build: %+v %v, want %+v", i, a.parts, a.ok, withoutDebris)
		}
	}
	g.Expect(builds.Load()).To(Equal(int32(1)), "five queries of one run, one build")
	g.Expect(manifest[1].Debris).To(Equal(int64(2)), "the builder's parts are not changed by the copies")

	// A query after the build finished looks again.
	again := make(chan struct{})
	close(again)
	release = again
	<-ask(q, nil)
	g.Expect(builds.Load()).To(Equal(int32(2)), "a finished build is not an answer to a later query")
}
