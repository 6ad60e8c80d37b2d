package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dtnflow/dtnflow/test/wanem"
)

// TestMain runs the command itself when the test binary is started as it.
func TestMain(m *testing.M) {
	if os.Getenv("WANEM_RUN_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func netns(t *testing.T, name string) {
	t.Helper()
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
}

func TestCommandJoinsServesAndCleansUp(t *testing.T) {
	if err := wanem.CanEmulate(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	rnd := make([]byte, 3)
	_, _ = rand.Read(rnd)
	id := hex.EncodeToString(rnd)
	a, b := "dfw-"+id+"-cmda", "dfw-"+id+"-cmdb"
	netns(t, a)
	netns(t, b)
	sock := filepath.Join(t.TempDir(), "wanem.sock")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-a-netns", a, "-b-netns", "/run/netns/"+b,
		"-rate", "100M", "-rtt", "10ms", "-loss", "0.001", "-control", sock, "-duration", "1m")
	cmd.Env = append(os.Environ(), "WANEM_RUN_MAIN=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(stdout)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	if !lines.Scan() {
		t.Fatal("no ready line")
	}
	var ready struct {
		Ready  bool         `json:"ready"`
		Config wanem.Config `json:"config"`
	}
	if err := json.Unmarshal(lines.Bytes(), &ready); err != nil || !ready.Ready || ready.Config.AtoB.RateBitsPerSecond != 100e6 || ready.Config.RTT() != 10*time.Millisecond {
		t.Fatalf("ready line %s: %v", lines.Text(), err)
	}
	cfg, err := wanem.NewControlClient(sock).Update(ctx, map[string]any{"aToB": map[string]any{"rateBitsPerSecond": 5e7}})
	if err != nil || cfg.AtoB.RateBitsPerSecond != 5e7 || cfg.BtoA.RateBitsPerSecond != 100e6 {
		t.Fatalf("update: %+v %v", cfg, err)
	}
	if out, err := exec.Command("ip", "netns", "exec", a, "ping", "-c", "1", "-W", "5", "10.250.0.2").CombinedOutput(); err != nil {
		t.Fatalf("ping across: %v %s", err, out)
	}
	if err := cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	var st wanem.Stats
	if !lines.Scan() || json.Unmarshal(lines.Bytes(), &st) != nil || st.AtoB.DeliveredSegments == 0 || st.Config.AtoB.RateBitsPerSecond != 5e7 {
		t.Fatalf("stats on SIGUSR1: %s", lines.Text())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !lines.Scan() || json.Unmarshal(lines.Bytes(), &st) != nil {
		t.Errorf("no stats at exit: %s", lines.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit: %v", err)
	}
	for _, ns := range []string{a, b} {
		if err := exec.Command("ip", "-n", ns, "link", "show", "dfw-wan0").Run(); err == nil {
			t.Errorf("%s: dfw-wan0 left behind", ns)
		}
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("control socket left behind")
	}
}

func TestCommandRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-b-netns", "x"},
		{"-a-netns", "x", "-b-netns", "y", "-loss", "2"},
		{"-a-netns", "x", "-b-netns", "y", "-rate", "fast"},
		{"-a-netns", "x", "-b-netns", "y", "-delay", "1ms", "-rtt", "2ms"},
		{"-a-netns", "x", "-b-netns", "y", "-a-addr", "nonsense"},
	} {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), "WANEM_RUN_MAIN=1")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "wanem:") {
			t.Errorf("%v: %v %s", args, err, out)
		}
	}
}
