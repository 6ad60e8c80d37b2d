// Package share lets standalone senders (`dtnflow-agent send --auto --share-dir DIR`)
// that use one path divide it the way the operator divides a path between its
// TransferJobs, with no Kubernetes and no server: through files in a directory they
// all see (the sending host's, or a file system its DTNs share).
//
//   - Members. Every job writes DIR/<path>/members/<job>.json (its priority, when it
//     joined, what it moves now) each report interval and removes it when it ends; a
//     file not written for Stale counts as gone (a job killed -9 leaves it behind).
//   - The path's capacity. The first job on a cold path probes it; the probe's
//     samples, model inputs and the capacity it found go to DIR/<path>/profile.json,
//     which the other jobs plan from instead of probing (a path's jobs never probe at
//     once). The highest rate the members reached together is kept there too: the
//     capacity is the larger of the two, as the PathProfile's is.
//   - Shares. Every member computes the same weighted max-min shares of the capacity
//     (optimizer.Shares, the operator's function) from the same files, and holds its
//     own job to its share while others share the path; a job alone is not held.
//
// The prober is the member that joined first (then the lowest job name) among the live
// ones, so a prober that dies is replaced by the next once its file goes stale.
package share

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/dtnflow/dtnflow/optimizer"
)

// Defaults for Dir.
const (
	// DefaultStale is how long a member's file lasts without being written.
	DefaultStale = 10 * time.Second
	// DefaultProfileMaxAge is how long a profile stays fresh (as a PathProfile's,
	// controllers/planning.DefaultProfileMaxAge).
	DefaultProfileMaxAge = 24 * time.Hour
)

// Member is one job on the path, as its file says.
type Member struct {
	Job string `json:"job"`
	// Priority is the job's weight in the shares (1–1000).
	Priority int `json:"priority"`
	// Joined is when the job joined the path; the earliest live member probes a cold
	// path.
	Joined time.Time `json:"joined"`
	// Written is when the file was last written.
	Written time.Time `json:"written"`
	// BitsPerSecond is what the job moved over its last report interval.
	BitsPerSecond int64 `json:"bitsPerSecond"`
	// State is what the job does: Probing, WaitingForPathProbe, Transferring.
	State string `json:"state"`
	PID   int    `json:"pid"`
}

// Profile is what the path's jobs learned of it.
type Profile struct {
	// Samples, Prober, StripeRates, Noise and RTTMicros are the probe's (the inputs of
	// the plan: autotune.Outcome's).
	Samples     []optimizer.Sample      `json:"samples"`
	Prober      optimizer.Prober        `json:"prober"`
	StripeRates []optimizer.StreamPoint `json:"stripeRates,omitempty"`
	// StripeStreams are the streams per stripe StripeRates ran with.
	StripeStreams int     `json:"stripeStreams,omitempty"`
	Noise         float64 `json:"noise,omitempty"`
	RTTMicros     int64   `json:"rttMicros,omitempty"`
	// PlateauBitsPerSecond is the capacity of the path the probe's plan found (its
	// PathCapacity's maximum).
	PlateauBitsPerSecond float64 `json:"plateauBitsPerSecond"`
	// ProbedBy and Probed say which job probed and when.
	ProbedBy string    `json:"probedBy"`
	Probed   time.Time `json:"probed"`
	// HighestAggregateBitsPerSecond is the most the path's jobs moved together in a
	// report interval, measured at HighestAggregateTime by HighestAggregateJobs jobs.
	HighestAggregateBitsPerSecond float64   `json:"highestAggregateBitsPerSecond,omitempty"`
	HighestAggregateJobs          int       `json:"highestAggregateJobs,omitempty"`
	HighestAggregateTime          time.Time `json:"highestAggregateTime,omitempty"`
}

// CapacityBitsPerSecond is what the shares divide: the larger of the plateau and the
// highest aggregate measured.
func (p Profile) CapacityBitsPerSecond() float64 {
	return math.Max(p.PlateauBitsPerSecond, p.HighestAggregateBitsPerSecond)
}

// Dir is one job's view of a path's directory.
type Dir struct {
	// Root is DIR/<path>.
	Root string
	Job  string
	// Priority is the job's weight (below 1 counts as 1).
	Priority int
	// Stale and MaxAge default to DefaultStale and DefaultProfileMaxAge.
	Stale, MaxAge time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	joined time.Time
}

// PathKey names a path's directory from the receiver's address: its host, so that
// every job to the same destination host shares one directory whatever the port.
func PathKey(receiver string) string {
	host := receiver
	if i := strings.LastIndex(receiver, ":"); i > 0 && !strings.HasSuffix(receiver, "]") {
		host = receiver[:i]
	}
	host = strings.Trim(host, "[]")
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '_'
	}, host)
}

// Open makes a path's directory under dir for job and joins it (writes its member
// file in state Joining).
func Open(dir, pathKey, job string, priority int) (*Dir, error) {
	if dir == "" || pathKey == "" || job == "" {
		return nil, errors.New("share: a directory, a path and a job are needed")
	}
	if strings.ContainsAny(job, "/\\") || job == "." || job == ".." {
		return nil, fmt.Errorf("share: job %q cannot name a file", job)
	}
	d := &Dir{Root: filepath.Join(dir, pathKey), Job: job, Priority: priority}
	if err := os.MkdirAll(filepath.Join(d.Root, "members"), 0o755); err != nil {
		return nil, fmt.Errorf("share: %w", err)
	}
	d.joined = d.now()
	return d, d.Write("Joining", 0)
}

func (d *Dir) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

func (d *Dir) stale() time.Duration {
	if d.Stale > 0 {
		return d.Stale
	}
	return DefaultStale
}

func (d *Dir) maxAge() time.Duration {
	if d.MaxAge > 0 {
		return d.MaxAge
	}
	return DefaultProfileMaxAge
}

// Write (re)writes the job's member file: its state and what it moved over the last
// interval. It also serves as the heartbeat.
func (d *Dir) Write(state string, bitsPerSecond int64) error {
	m := Member{Job: d.Job, Priority: max(d.Priority, 1), Joined: d.joined, Written: d.now(), BitsPerSecond: bitsPerSecond, State: state, PID: os.Getpid()}
	return writeJSON(filepath.Join(d.Root, "members", d.Job+".json"), m)
}

// Leave removes the job's member file: the others' shares grow at their next interval.
func (d *Dir) Leave() error {
	err := os.Remove(filepath.Join(d.Root, "members", d.Job+".json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// Members are the live members (written within Stale), the job itself included,
// earliest joined first (then by job name). Files that cannot be read are skipped:
// another job may be replacing its file at that moment.
func (d *Dir) Members() ([]Member, error) {
	ents, err := os.ReadDir(filepath.Join(d.Root, "members"))
	if err != nil {
		return nil, fmt.Errorf("share: %w", err)
	}
	now := d.now()
	var out []Member
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		var m Member
		if readJSON(filepath.Join(d.Root, "members", e.Name()), &m) != nil {
			continue
		}
		if now.Sub(m.Written) > d.stale() {
			continue
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Joined.Equal(out[j].Joined) {
			return out[i].Joined.Before(out[j].Joined)
		}
		return out[i].Job < out[j].Job
	})
	return out, nil
}

// Prober says whether this job is the one to probe a cold path: the earliest live
// member.
func Prober(members []Member, job string) bool {
	return len(members) == 0 || members[0].Job == job
}

// Profile is the path's profile when there is one and it is fresh (probed, or its
// highest aggregate measured, within MaxAge).
func (d *Dir) Profile() (Profile, bool) {
	var p Profile
	if readJSON(filepath.Join(d.Root, "profile.json"), &p) != nil || !(p.PlateauBitsPerSecond > 0) {
		return Profile{}, false
	}
	last := p.Probed
	if p.HighestAggregateTime.After(last) {
		last = p.HighestAggregateTime
	}
	if d.now().Sub(last) > d.maxAge() {
		return Profile{}, false
	}
	return p, true
}

// SaveProbe writes what the job's probe learned as the path's profile.
func (d *Dir) SaveProbe(p Profile) error {
	p.ProbedBy, p.Probed = d.Job, d.now()
	return writeJSON(filepath.Join(d.Root, "profile.json"), p)
}

// aggregateGain is how far the members must go above the highest aggregate recorded
// before the profile is written again.
const aggregateGain = 0.02

// LearnAggregate records the members' rates together as the path's highest aggregate
// when it is higher (by aggregateGain) than the one the profile holds. It reports
// whether it wrote. Members that write at the same moment may each write; the higher
// wins at the next interval.
func (d *Dir) LearnAggregate(members []Member) (bool, error) {
	p, ok := d.Profile()
	if !ok {
		return false, nil
	}
	var agg float64
	n := 0
	for _, m := range members {
		if m.State == "Transferring" && m.BitsPerSecond > 0 {
			agg += float64(m.BitsPerSecond)
			n++
		}
	}
	if n < 2 || agg <= p.HighestAggregateBitsPerSecond*(1+aggregateGain) {
		return false, nil
	}
	p.HighestAggregateBitsPerSecond, p.HighestAggregateJobs, p.HighestAggregateTime = agg, n, d.now()
	return true, writeJSON(filepath.Join(d.Root, "profile.json"), p)
}

// ShareOf is job's share of the path among members: weighted max-min over the one
// link (optimizer.Shares). Paced says the job is to be held to it (others share the
// path).
func ShareOf(members []Member, job string, capacityBitsPerSecond float64) optimizer.JobShare {
	claims := make([]optimizer.ShareClaim, 0, len(members))
	self := -1
	for _, m := range members {
		if m.Job == job {
			self = len(claims)
		}
		claims = append(claims, optimizer.ShareClaim{ID: m.Job, Weight: m.Priority, Links: []string{"path"}})
	}
	if self < 0 {
		self = len(claims)
		claims = append(claims, optimizer.ShareClaim{ID: job, Weight: 1, Links: []string{"path"}})
	}
	return optimizer.Shares([]optimizer.SharedLink{{Name: "path", CapacityBitsPerSecond: capacityBitsPerSecond}}, claims)[self]
}

// writeJSON writes v to path atomically (a temporary file renamed over it), so that a
// reader sees the old file or the new one, never half of one.
func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("share: %w", err)
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("share: %w", err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("share: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("share: %w", err)
	}
	return nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
