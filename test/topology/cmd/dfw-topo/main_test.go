package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dtnflow/dtnflow/test/topology"
	"github.com/dtnflow/dtnflow/test/wanem"
)

func TestMain(m *testing.M) {
	if os.Getenv("DFW_TOPO_RUN_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), "DFW_TOPO_RUN_MAIN=1")
	return cmd
}

func namespaces(prefix string) []string {
	var out []string
	ents, _ := os.ReadDir("/run/netns")
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestUpSignalAndCrashDown: up, change the link through its control socket, stop with
// SIGTERM (everything goes); up again, SIGKILL, then `down -id` (everything goes).
func TestUpSignalAndCrashDown(t *testing.T) {
	if err := wanem.CanEmulate(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, how := range []string{"SIGTERM", "SIGKILL"} {
		id := topology.NewID()
		t.Cleanup(func() { _ = topology.SweepID(id) })
		up := command(ctx, "up", "-id", id, "-sources", "2", "-destinations", "1", "-rate", "1G", "-rtt", "4ms",
			"-src-nic", "500M", "-state-dir", dir, "-lifetime", "2m")
		stdout, _ := up.StdoutPipe()
		if err := up.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(stdout)
		lines.Buffer(make([]byte, 1<<20), 1<<20)
		var desc topology.Description
		if !lines.Scan() || json.Unmarshal(lines.Bytes(), &desc) != nil || len(desc.Sources) != 2 || desc.ControlSocket != filepath.Join(dir, id+".sock") {
			t.Fatalf("description: %s", lines.Text())
		}
		if got := namespaces("dfw-" + id + "-"); len(got) != 5 {
			t.Fatalf("namespaces %v", got)
		}
		if _, err := wanem.NewControlClient(desc.ControlSocket).Update(ctx, map[string]any{"both": map[string]any{"loss": 0.01}}); err != nil {
			t.Fatal(err)
		}
		out, err := command(ctx, "list", "-state-dir", dir).CombinedOutput()
		if err != nil || !strings.Contains(string(out), id+"\talive=true") {
			t.Errorf("list: %v %s", err, out)
		}
		if how == "SIGTERM" {
			_ = up.Process.Signal(syscall.SIGTERM)
			if err := up.Wait(); err != nil {
				t.Errorf("up after SIGTERM: %v", err)
			}
		} else {
			_ = up.Process.Signal(syscall.SIGKILL)
			_ = up.Wait()
			if got := namespaces("dfw-" + id + "-"); len(got) != 5 {
				t.Fatalf("a killed owner cannot clean up, yet: %v", got)
			}
			if out, err := command(ctx, "down", "-id", id, "-state-dir", dir).CombinedOutput(); err != nil {
				t.Fatalf("down: %v %s", err, out)
			}
		}
		if got := namespaces("dfw-" + id + "-"); len(got) != 0 {
			t.Errorf("%s: left behind %v", how, got)
		}
		for _, f := range []string{id + ".json", id + ".sock", id + ".hosts"} {
			if _, err := os.Stat(filepath.Join(dir, f)); !os.IsNotExist(err) {
				t.Errorf("%s: %s left behind", how, f)
			}
		}
	}
}

func TestUpRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"up", "-sources", "0"},
		{"up", "-id", "NOT_OK"},
		{"up", "-subnet", "10.0.0.0/8"},
		{"up", "-lifetime", "-1s"},
		{"up", "-src-nic", "lots"},
		{"down"},
		{"frobnicate"},
	} {
		out, err := command(context.Background(), args...).CombinedOutput()
		if err == nil {
			t.Errorf("%v succeeded: %s", args, out)
		}
	}
}
