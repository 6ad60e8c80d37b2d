package mover

import "github.com/dtnflow/dtnflow/agent/wire"

// The final check asks every stripe of a job for its receiver's manifest at once, and
// several stripes often end at one receiver (a probe's extra stripes, a plan of more
// stripes than nodes): each query looked at every final file again, and four stripes
// into one receiver made the 20 000 small files' check take 0.58 s on the local
// cluster where one look takes 0.15 s (docs/benchmarks.md, twenty-first session).
// Queries of one run that arrive while its manifest is being built wait for that build
// instead.
//
// Why the build a query joins is fresh enough for it: a coordinator asks for a run's
// manifest only once every file of the run is done, that is once each receiver has
// handed every file of the run to its committer and said so. Every query of the run
// therefore arrives after the last of those hand-overs, and so does the start of any
// build a query of the run began; the build flushes the committer first. A query
// never takes a finished build's result: one asked again after its session broke gets
// a new look.

// manifestBuild is one build of a job's manifest that queries wait for.
type manifestBuild struct {
	done  chan struct{}
	parts []wire.Manifest
	// waiting is how many queries besides the builder's wait for it (tests).
	waiting int
}

// sharedManifest returns the manifest's parts for q: built by build, or by the build
// of the same query already under way. Only the builder's parts count the debris its
// look removed: the coordinator adds up every answer's. ok is false when gone closed
// (the asking session ended) before the build it waited for finished. A query without
// a run is always built on its own: it names no final check.
func (j *rjob) sharedManifest(q wire.ManifestQuery, gone <-chan struct{}, build func() []wire.Manifest) (parts []wire.Manifest, ok bool) {
	if q.Run == "" {
		return build(), true
	}
	j.manifestMu.Lock()
	if b := j.manifests[q]; b != nil {
		b.waiting++
		j.manifestMu.Unlock()
		select {
		case <-b.done:
		case <-gone:
			return nil, false
		}
		parts = make([]wire.Manifest, len(b.parts))
		for i, p := range b.parts {
			p.Debris = 0
			parts[i] = p
		}
		return parts, true
	}
	b := &manifestBuild{done: make(chan struct{})}
	if j.manifests == nil {
		j.manifests = map[wire.ManifestQuery]*manifestBuild{}
	}
	j.manifests[q] = b
	j.manifestMu.Unlock()
	defer func() {
		j.manifestMu.Lock()
		delete(j.manifests, q)
		j.manifestMu.Unlock()
		close(b.done)
	}()
	b.parts = build()
	return b.parts, true
}
