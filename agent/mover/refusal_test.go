package mover

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	"github.com/dtnflow/dtnflow/agent/wire"
)

// A receiver flooded with connections ran out of file descriptors while opening a
// job's journal, and the sender failed the job at once although the flood was gone a
// moment later (TestConnectionFlood, under load). A refusal for want of a resource the
// receiver may have again is tried again; any other refusal still stops the stripe.
func TestRefusalForWantOfResourcesIsTriedAgain(t *testing.T) {
	journalOpen := func(errno syscall.Errno) error {
		return fmt.Errorf("opening journal directory .dtnflow/job-1: %w", &fs.PathError{Op: "openat", Path: ".dtnflow/job-1", Err: errno})
	}
	for _, tc := range []struct {
		name            string
		err             error
		retry, stopsJob bool
	}{
		{"out of descriptors", journalOpen(syscall.EMFILE), true, false},
		{"the system out of descriptors", journalOpen(syscall.ENFILE), true, false},
		{"out of memory", journalOpen(syscall.ENOMEM), true, false},
		{"permission denied", journalOpen(syscall.EACCES), false, true},
		{"disk full", journalOpen(syscall.ENOSPC), false, true},
		{"a job name refused", errors.New(`job name "../x" refused`), false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := refusal(tc.err)
			if m.Retry != tc.retry || m.Integrity {
				t.Fatalf("refusal(%v) = %+v, want Retry %v", tc.err, m, tc.retry)
			}
			err := refused(m)
			var fe *FatalError
			if errors.As(err, &fe) != tc.stopsJob {
				t.Fatalf("refused(%+v) = %T %v, want it to stop the stripe: %v", m, err, err, tc.stopsJob)
			}
			if m.Error == "" || err.Error() == "" {
				t.Fatalf("a refusal without its reason: %+v, %v", m, err)
			}
		})
	}
	var ie *IntegrityError
	if err := refused(refusal(errors.New("x"))); errors.As(err, &ie) {
		t.Fatalf("a plain refusal taken for an integrity failure: %v", err)
	}
	if err := refused(wire.ErrorMsg{Error: "frame tag", Integrity: true}); !errors.As(err, &ie) {
		t.Fatalf("an integrity refusal: %T %v", err, err)
	}
}
