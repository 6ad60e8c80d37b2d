package topology

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DefaultStateDir holds one state file per topology. It is on tmpfs, like the
// namespaces it describes, so both vanish on reboot.
const DefaultStateDir = "/run/dtnflow/topology"

// State is what a topology recorded about itself, written before each object is
// created, so that Down can remove exactly what was built even after a crash.
type State struct {
	ID     string `json:"id"`
	Prefix string `json:"prefix"`
	// PID and PIDStart identify the process that owns the emulated link (start time
	// in clock ticks since boot, so a recycled PID is not mistaken for it).
	PID      int       `json:"pid"`
	PIDStart uint64    `json:"pidStart"`
	Created  time.Time `json:"created"`
	Deadline time.Time `json:"deadline"`
	// Namespaces in creation order; deleting a namespace deletes every link in it.
	Namespaces []string `json:"namespaces"`
	// ControlSocket of the running link, if one is served.
	ControlSocket string `json:"controlSocket,omitempty"`
	// Description is what the topology looks like (hosts and addresses), for users.
	Description *Description `json:"description,omitempty"`
}

// stateFile persists a State.
type stateFile struct {
	path  string
	state State
}

func (f *stateFile) save() error {
	b, err := json.MarshalIndent(f.state, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
		return err
	}
	tmp := f.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, f.path)
}

// intend records a namespace before it is created.
func (f *stateFile) intend(ns string) error {
	f.state.Namespaces = append(f.state.Namespaces, ns)
	return f.save()
}

// ReadState reads a state file.
func ReadState(path string) (State, error) {
	var s State
	b, err := os.ReadFile(path)
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	if !validID(s.ID) || s.Prefix != prefixOf(s.ID) {
		return s, fmt.Errorf("%s: id %q and prefix %q do not match", path, s.ID, s.Prefix)
	}
	return s, nil
}

// StatePath is where the state of topology id lives in dir.
func StatePath(dir, id string) string { return filepath.Join(dir, id+".json") }

// List reads every state file in dir, oldest first.
func List(dir string) ([]State, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []State
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		s, err := ReadState(filepath.Join(dir, e.Name()))
		if err != nil {
			return out, err
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// Alive reports whether the process that built the topology still runs.
func (s State) Alive() bool {
	if s.PID <= 0 {
		return false
	}
	start, err := processStart(s.PID)
	return err == nil && start == s.PIDStart
}

// processStart is field 22 of /proc/<pid>/stat: the process's start time. A zombie
// (killed, not yet reaped) counts as gone.
func processStart(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields after it follow the ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("pid %d: unexpected stat", pid)
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 {
		return 0, fmt.Errorf("pid %d: unexpected stat", pid)
	}
	if fields[0] == "Z" || fields[0] == "X" {
		return 0, fmt.Errorf("pid %d has exited", pid)
	}
	return strconv.ParseUint(fields[19], 10, 64)
}

// DownState removes a topology from its state file: it stops the process that owns
// it if that process still runs (SIGTERM, then SIGKILL after grace), deletes every
// recorded namespace that still exists, and removes the state file. It never touches
// a name outside the topology's prefix.
func DownState(path string, grace time.Duration) error {
	s, err := ReadState(path)
	if err != nil {
		return err
	}
	if s.Alive() && s.PID != os.Getpid() {
		_ = syscall.Kill(s.PID, syscall.SIGTERM)
		deadline := time.Now().Add(grace)
		for s.Alive() && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if s.Alive() {
			_ = syscall.Kill(s.PID, syscall.SIGKILL)
		}
		// The owner's own cleanup may have removed the state file already.
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return sweep(s.Prefix, s.Namespaces)
		}
	}
	if err := sweep(s.Prefix, s.Namespaces); err != nil {
		return err
	}
	if s.ControlSocket != "" {
		_ = os.Remove(s.ControlSocket)
	}
	_ = os.Remove(hostsPath(filepath.Dir(path), s.ID))
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// sweep deletes the namespaces named (in reverse order), skipping any outside prefix.
func sweep(prefix string, namespaces []string) error {
	var errs []error
	for i := len(namespaces) - 1; i >= 0; i-- {
		ns := namespaces[i]
		if !strings.HasPrefix(ns, prefix) {
			errs = append(errs, fmt.Errorf("refusing to delete %q: not under %q", ns, prefix))
			continue
		}
		if err := deleteNetns(ns); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// SweepID deletes every namespace named dfw-<id>-* in /run/netns, for a topology whose
// state file is gone. The id must be one this tool generates or accepts.
func SweepID(id string) error {
	if !validID(id) {
		return fmt.Errorf("id %q: want 3 to 12 lowercase letters or digits", id)
	}
	entries, err := os.ReadDir("/run/netns")
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	prefix := prefixOf(id)
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			names = append(names, e.Name())
		}
	}
	return sweep(prefix, names)
}
