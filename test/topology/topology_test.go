package topology

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dtnflow/dtnflow/test/wanem"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if err := wanem.CanEmulate(); err != nil {
		t.Skipf("skipping: %v", err)
	}
}

// upForTest builds spec with a state dir of the test's own and tears it down when the
// test ends, whatever happens.
func upForTest(t *testing.T, spec Spec) *Topology {
	t.Helper()
	requireRoot(t)
	if spec.StateDir == "" {
		spec.StateDir = t.TempDir()
	}
	if spec.Lifetime == 0 {
		spec.Lifetime = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topo, err := Up(ctx, spec)
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	t.Cleanup(func() {
		if err := topo.Down(); err != nil {
			t.Errorf("Down: %v", err)
		}
	})
	return topo
}

func namespacesWithPrefix(t *testing.T, prefix string) []string {
	t.Helper()
	entries, err := os.ReadDir("/run/netns")
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

func run(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(cmd.Args, " "), err, out)
	}
	return string(out)
}

func TestSpecDefaultsAndValidation(t *testing.T) {
	ok := Spec{Sources: 1, Destinations: 1}
	if err := ok.defaults(); err != nil {
		t.Fatal(err)
	}
	if !validID(ok.ID) || ok.MTU != 9000 || ok.Subnet.String() != "10.250.0.0/16" || ok.Lifetime != time.Hour || ok.StateDir != DefaultStateDir {
		t.Errorf("defaults: %+v", ok)
	}
	for want, s := range map[string]Spec{
		"id":           {ID: "Bad_ID", Sources: 1, Destinations: 1},
		"sources":      {Sources: 0, Destinations: 1},
		"destinations": {Sources: 1, Destinations: 201},
		"subnet":       {Sources: 1, Destinations: 1, Subnet: netip.MustParsePrefix("10.0.0.0/8")},
		"hostSysctls":  {Sources: 1, Destinations: 1, HostSysctls: map[string]string{"kernel.panic": "1"}},
		"aToB.loss":    {Sources: 1, Destinations: 1, Link: wanem.Config{AtoB: wanem.Direction{Loss: 3}}},
		"sourceNIC":    {Sources: 1, Destinations: 1, SourceNIC: NIC{RateBitsPerSecond: -1}},
	} {
		if err := s.defaults(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v", want, err)
		}
	}
}

func TestTBFArguments(t *testing.T) {
	got := strings.Join(NIC{RateBitsPerSecond: 10e9}.tbfArgs(9000), " ")
	if got != "tbf rate 10000000000bit burst 1250000 limit 12500000" {
		t.Errorf("10G: %s", got)
	}
	got = strings.Join(NIC{RateBitsPerSecond: 100e6}.tbfArgs(9000), " ")
	if got != "tbf rate 100000000bit burst 131072 limit 524288" {
		t.Errorf("100M: %s", got)
	}
}

func TestUpBuildsReachableIsolatedHostsAndDownRemovesThem(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "ctl.sock")
	topo := upForTest(t, Spec{
		Sources: 2, Destinations: 2, StateDir: dir, ControlSocket: sock,
		Link:        wanem.Symmetric(wanem.Direction{Delay: 2 * time.Millisecond, RateBitsPerSecond: 1e9}),
		SourceNIC:   NIC{RateBitsPerSecond: 500e6},
		HostSysctls: map[string]string{"net.ipv4.tcp_wmem": "4096 16384 8388608"},
	})
	prefix := prefixOf(topo.ID)
	if got := namespacesWithPrefix(t, prefix); len(got) != 6 {
		t.Fatalf("namespaces %v, want 6", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, s := range topo.Sources {
		for _, d := range topo.Destinations {
			// By name: the topology's hosts file resolves it.
			run(t, s.Command(ctx, "ping", "-c", "1", "-W", "5", d.Name))
		}
	}
	if out := run(t, topo.Sources[0].Command(ctx, "getent", "hosts", topo.Sources[0].Addr.String())); !strings.Contains(out, "src0") {
		t.Errorf("own address does not resolve: %q", out)
	}
	// Nothing outside the topology is routable from a host (asking the route table
	// sends nothing).
	if out, err := topo.Sources[0].Command(ctx, "ip", "route", "get", "10.99.0.1").CombinedOutput(); err == nil {
		t.Errorf("a host routes outside the topology: %s", out)
	}
	if out := run(t, topo.Sources[1].Command(ctx, "tc", "qdisc", "show", "dev", "eth0")); !strings.Contains(out, "tbf") || !strings.Contains(out, "500Mbit") {
		t.Errorf("source NIC cap missing: %s", out)
	}
	if out := run(t, topo.Destinations[0].Command(ctx, "tc", "qdisc", "show", "dev", "eth0")); strings.Contains(out, "tbf") {
		t.Errorf("destination has a cap it was not given: %s", out)
	}
	if out := run(t, topo.Sources[0].Command(ctx, "sysctl", "-n", "net.ipv4.tcp_wmem")); strings.Fields(out)[2] != "8388608" {
		t.Errorf("host sysctl not set: %s", out)
	}
	st, err := ReadState(topo.StateFile)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Alive() || len(st.Namespaces) != 6 || st.Description == nil || len(st.Description.Destinations) != 2 {
		t.Errorf("state: %+v", st)
	}
	if _, err := wanem.NewControlClient(sock).Update(ctx, map[string]any{"aToB": map[string]any{"rateBitsPerSecond": 5e8}}); err != nil {
		t.Fatal(err)
	}
	if topo.Link.Config().AtoB.RateBitsPerSecond != 5e8 {
		t.Error("control socket did not change the link")
	}

	if err := topo.Down(); err != nil {
		t.Fatal(err)
	}
	if got := namespacesWithPrefix(t, prefix); len(got) != 0 {
		t.Errorf("left behind: %v", got)
	}
	for _, f := range []string{topo.StateFile, sock, topo.Sources[0].HostsFile} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s still there", f)
		}
	}
	select {
	case <-topo.Done():
	default:
		t.Error("Done not closed after Down")
	}
	if err := topo.Down(); err != nil {
		t.Errorf("second Down: %v", err)
	}
}

func TestUpFailureRemovesWhatItBuilt(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	id := NewID()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := Up(ctx, Spec{ID: id, Sources: 2, Destinations: 1, StateDir: dir,
		HostSysctls: map[string]string{"net.ipv4.no_such_sysctl": "1"}})
	if err == nil {
		t.Fatal("Up with a bad sysctl succeeded")
	}
	if got := namespacesWithPrefix(t, prefixOf(id)); len(got) != 0 {
		t.Errorf("left behind after %v: %v", err, got)
	}
	if _, err := os.Stat(StatePath(dir, id)); !os.IsNotExist(err) {
		t.Errorf("state file left behind")
	}
}

func TestUpRefusesAnExistingNamespace(t *testing.T) {
	requireRoot(t)
	id := NewID()
	squatter := prefixOf(id) + "src0"
	run(t, exec.Command("ip", "netns", "add", squatter))
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", squatter).Run() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := Up(ctx, Spec{ID: id, Sources: 1, Destinations: 1, StateDir: t.TempDir()}); err == nil {
		t.Fatal("Up over an existing namespace succeeded")
	}
	if _, err := os.Stat("/run/netns/" + squatter); err != nil {
		t.Errorf("the cleanup deleted a namespace it did not create: %v", err)
	}
	if got := namespacesWithPrefix(t, prefixOf(id)); len(got) != 1 {
		t.Errorf("namespaces after the failed Up: %v", got)
	}
}

func TestLifetimeTearsDown(t *testing.T) {
	topo := upForTest(t, Spec{Sources: 1, Destinations: 1, Lifetime: 2 * time.Second})
	select {
	case <-topo.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("not torn down after its lifetime")
	}
	if got := namespacesWithPrefix(t, prefixOf(topo.ID)); len(got) != 0 {
		t.Errorf("left behind: %v", got)
	}
}

func TestSharedBottleneck(t *testing.T) {
	const rate = 40e6
	topo := upForTest(t, Spec{Sources: 2, Destinations: 2,
		Link: wanem.Symmetric(wanem.Direction{RateBitsPerSecond: rate, Delay: time.Millisecond})})
	const size = 2 << 20
	start := time.Now()
	errs := make(chan error, 2)
	for i := range 2 {
		go func() { errs <- transfer(topo.Sources[i], topo.Destinations[i], size) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// Two flows share one line: together they cannot beat it.
	elapsed := time.Since(start)
	if floor := time.Duration(float64(2*size*8) / float64(rate) * float64(time.Second)); elapsed < floor {
		t.Errorf("2 × 2 MiB over a shared %v line in %v: faster than the line (%v)", wanem.FormatRate(rate), elapsed, floor)
	}
	if st := topo.Link.Stats().AtoB; st.DeliveredBytes < 2*size {
		t.Errorf("the bottleneck carried %d bytes, want ≥ %d", st.DeliveredBytes, 2*size)
	}
}

// transfer sends size bytes over TCP from src to dst.
func transfer(src, dst Host, size int) error {
	var ln net.Listener
	if err := dst.Do(func() (err error) { ln, err = net.Listen("tcp4", dst.Addr.String()+":0"); return err }); err != nil {
		return err
	}
	defer ln.Close()
	got := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- err
			return
		}
		defer c.Close()
		_, err = io.Copy(io.Discard, c)
		got <- err
	}()
	var c net.Conn
	if err := src.Do(func() (err error) { c, err = net.DialTimeout("tcp4", ln.Addr().String(), 5*time.Second); return err }); err != nil {
		return err
	}
	if _, err := c.Write(make([]byte, size)); err != nil {
		return err
	}
	c.Close()
	select {
	case err := <-got:
		return err
	case <-time.After(30 * time.Second):
		return context.DeadlineExceeded
	}
}

// TestDownAfterCrash kills the owning process with SIGKILL (no chance to clean up) and
// removes its topology from the state file, as `dfw-topo down` does.
func TestDownAfterCrash(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	id := NewID()
	t.Cleanup(func() { _ = SweepID(id) })
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperOwner$")
	cmd.Env = append(os.Environ(), "TOPOLOGY_HELPER_ID="+id, "TOPOLOGY_HELPER_DIR="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var desc Description
	if err := json.NewDecoder(stdout).Decode(&desc); err != nil {
		t.Fatalf("helper did not describe its topology: %v", err)
	}
	if got := namespacesWithPrefix(t, prefixOf(id)); len(got) != 4 {
		t.Fatalf("namespaces %v, want 4", got)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	st, err := ReadState(StatePath(dir, id))
	if err != nil {
		t.Fatal(err)
	}
	if st.Alive() {
		t.Error("state says a killed owner is alive")
	}
	if err := DownState(StatePath(dir, id), time.Second); err != nil {
		t.Fatal(err)
	}
	if got := namespacesWithPrefix(t, prefixOf(id)); len(got) != 0 {
		t.Errorf("left behind: %v", got)
	}
	if _, err := os.Stat(StatePath(dir, id)); !os.IsNotExist(err) {
		t.Error("state file left behind")
	}
}

// TestDownStopsARunningOwner: down on a live topology asks its owner to clean up.
func TestDownStopsARunningOwner(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	id := NewID()
	t.Cleanup(func() { _ = SweepID(id) })
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperOwner$")
	cmd.Env = append(os.Environ(), "TOPOLOGY_HELPER_ID="+id, "TOPOLOGY_HELPER_DIR="+dir)
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var desc Description
	if err := json.NewDecoder(stdout).Decode(&desc); err != nil {
		t.Fatal(err)
	}
	if err := DownState(StatePath(dir, id), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("owner did not exit cleanly on SIGTERM: %v", err)
	}
	if got := namespacesWithPrefix(t, prefixOf(id)); len(got) != 0 {
		t.Errorf("left behind: %v", got)
	}
}

// TestHelperOwner is not a test: it is the process TestDownAfterCrash and
// TestDownStopsARunningOwner start, which builds a topology, prints its description
// and holds it until SIGTERM.
func TestHelperOwner(t *testing.T) {
	id := os.Getenv("TOPOLOGY_HELPER_ID")
	if id == "" {
		t.Skip("helper process only")
	}
	ctx, stop := signalContext()
	defer stop()
	topo, err := Up(ctx, Spec{ID: id, Sources: 1, Destinations: 1, StateDir: os.Getenv("TOPOLOGY_HELPER_DIR"), Lifetime: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer topo.Down()
	_ = json.NewEncoder(os.Stdout).Encode(topo.Description)
	select {
	case <-ctx.Done():
	case <-topo.Done():
	}
	if err := topo.Down(); err != nil {
		t.Fatal(err)
	}
}
