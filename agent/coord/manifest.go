package coord

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/agent/fsname"
	"github.com/dtnflow/dtnflow/agent/wire"
)

// The final check. Units done are what the receivers said as they went; Complete means
// more: the destination holds, at their final names, exactly the files of the source
// listing, with the source's sizes, mtimes and (when the job verifies) digests, and the
// run made nothing final that the listing does not hold. Once every file is done the
// coordinator asks each stripe for its receiver's manifest (the files its journal says
// are final, each checked at its final name by the receiver) and compares their union
// with the listing; anything else fails the job naming the files. Files skipped at the
// source (Options.SourceErrors Skip) are left out of the comparison, and the job ends
// PartiallyComplete.

// manifestKey is one version of a destination file.
type manifestKey struct {
	path          string
	size, mtimeNs int64
}

// newRunID names a run of a job.
func newRunID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Run is this run's id (wire.JobConfig.Run).
func (c *Core) Run() string { return c.opts.Run }

// checkingLocked says every file is done and the manifests are being compared.
func (c *Core) checkingLocked() bool { return c.manifest != nil }

// startCheckLocked begins the final check: the next request of every stripe asks it
// for its receiver's manifest.
func (c *Core) startCheckLocked() {
	c.manifest = map[manifestKey]wire.ManifestFile{}
	c.answered = map[*Member]bool{}
	c.log.Info("Every file is done; checking the destination against the listing", "files", c.dataset.Files)
}

// manifestPart records part of a member's manifest; the last part may end the check.
func (c *Core) manifestPart(m *Member, mf wire.Manifest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.checkingLocked() || c.phase.Finished() {
		return
	}
	for _, f := range mf.Files {
		k := manifestKey{string(f.Path), f.Size, f.MtimeNs}
		if old, ok := c.manifest[k]; ok && old.Problem == "" && f.Problem != "" {
			continue // another receiver sees it in place: that one counts
		}
		c.manifest[k] = f
	}
	c.debris += mf.Debris
	if mf.Last {
		c.answered[m] = true
		c.finishCheckLocked()
		c.signalLocked()
	}
}

// finishCheckLocked compares once every stripe has answered.
func (c *Core) finishCheckLocked() {
	if !c.checkingLocked() || c.phase.Finished() {
		return
	}
	waiting := 0
	for m := range c.members {
		if m.stripe >= 0 && !c.answered[m] {
			waiting++
		}
	}
	if waiting > 0 || len(c.answered) == 0 {
		return
	}
	problems := c.compareLocked()
	if c.debris > 0 {
		c.log.Info("Removed temporary files left next to final ones", "files", c.debris)
	}
	if len(problems) == 0 {
		c.phase = contract.PhaseComplete
		if c.filesSkipped > 0 {
			// every file read is verified in place, but not every file of the
			// listing: never Complete
			c.phase = contract.PhasePartiallyComplete
		}
		c.log.Info("Job finished", "phase", c.phase, "files", c.filesDone, "bytes", c.bytesDone, "skipped", c.filesSkipped, "notMoved", c.entriesNotMoved)
		return
	}
	shown := make([]string, 0, 5)
	for _, p := range problems[:min(len(problems), 5)] {
		shown = append(shown, p.String())
	}
	c.errMsg = fmt.Sprintf("the destination does not match the source listing (%d files): %s", len(problems), strings.Join(shown, "; "))
	if len(problems) > len(shown) {
		c.errMsg += fmt.Sprintf("; and %d more", len(problems)-len(shown))
	}
	c.errCount++
	c.phase = contract.PhaseFailed
	c.rejected = int64(len(problems))
	for _, p := range problems {
		c.log.Error("The destination does not match the source", "path", p.Path, "problem", p.Error)
		c.listFailureLocked(p)
	}
	c.log.Info("Job finished", "phase", c.phase, "files", c.filesDone, "bytes", c.bytesDone, "error", c.errMsg)
}

// compareLocked lists what differs between the listing and the manifests.
func (c *Core) compareLocked() []contract.FailedFile {
	var problems []contract.FailedFile
	for _, f := range c.files {
		if f.skipped {
			continue // listed as skipped; whatever the destination holds of it stays
		}
		name := fsname.Show(f.dest)
		e, ok := c.manifest[manifestKey{f.dest, f.f.Size, f.f.MtimeNs}]
		switch {
		case !ok:
			problems = append(problems, contract.FailedFile{Path: name, Error: "no receiver holds it as final"})
		case e.Problem != "":
			problems = append(problems, contract.FailedFile{Path: name, Error: e.Problem})
		default:
			if d := digestMismatch(f, e); d != "" {
				problems = append(problems, contract.FailedFile{Path: name, Error: d})
			}
		}
	}
	var extra []contract.FailedFile
	for k, e := range c.manifest {
		if e.ThisRun && c.byDest[k.path] == nil {
			extra = append(extra, contract.FailedFile{Path: fsname.Show(k.path), Error: "made final by this run but not in the source listing"})
		}
	}
	sort.Slice(extra, func(i, j int) bool { return extra[i].Path < extra[j].Path })
	return append(problems, extra...)
}

// digestMismatch compares the digests the senders computed over what they sent this
// run with those the receivers verified and journaled; a file done before this run
// (found in a journal) has no source digest here and was verified when it was sent.
func digestMismatch(f *cfile, e wire.ManifestFile) string {
	if f.chunks <= 1 {
		src := f.digest
		if f.chunks == 1 {
			src = f.chunkDigests[0]
		}
		dst := e.Digest
		if dst == "" && len(e.Chunks) > 0 {
			dst = e.Chunks[0]
		}
		if src != "" && dst != "" && src != dst {
			return fmt.Sprintf("holds other bytes than the source (digest %s, source %s)", short(dst), short(src))
		}
		return ""
	}
	for i, src := range f.chunkDigests {
		if src == "" || int(i) >= len(e.Chunks) || e.Chunks[i] == "" {
			continue
		}
		if e.Chunks[i] != src {
			return fmt.Sprintf("chunk %d holds other bytes than the source (digest %s, source %s)", i, short(e.Chunks[i]), short(src))
		}
	}
	return ""
}

func short(d string) string { return d[:min(len(d), 16)] }
