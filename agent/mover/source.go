package mover

import (
	"context"
	"errors"

	"github.com/dtnflow/dtnflow/agent/wire"
)

// WorkSource is where a stripe gets its configuration and its work and where it
// reports: the coordinator, in the same process (standalone send) or across a
// connection (send --coordinator).
type WorkSource interface {
	// Configs delivers the job configuration, first and whenever it changes.
	Configs() <-chan wire.JobConfig
	// NeedSummary says the coordinator does not yet know what the receivers' journals
	// hold; the stripe asks its receiver and passes the answer on with Summary.
	NeedSummary() bool
	Summary(wire.Summary)
	// Manifest passes on the receiver's manifest, asked for by a grant with Manifest.
	Manifest(wire.Manifest)
	// Request asks for up to n units. It blocks while there is no work for now but
	// some may come back (leased to others, or paused).
	Request(ctx context.Context, n int) (wire.WorkGrant, error)
	Done([]wire.UnitResult)
	Stats(wire.StripeStats)
	// Probes delivers the coordinator's requests for memory-to-memory samples.
	Probes() <-chan wire.ProbeRequest
	ProbeDone(wire.ProbeResult)
}

// ErrSourceLost is returned by a WorkSource whose coordinator went away; the stripe
// stops and its caller reconnects.
var ErrSourceLost = errors.New("lost the coordinator")
