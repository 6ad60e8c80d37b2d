// Package controllers tests the dtnflow manager on a real kube-apiserver and etcd. No
// kubelet, scheduler or agent runs: the tests play them — they move pods through their
// phases, mark nodes Ready or not, and write the coordinator's reports into its pod's
// annotation as the agent does — and wait for the manager with gomega's Eventually and
// named timeouts, never with sleeps.
package controllers

import (
	"fmt"
	"log/slog"
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/dtnflow/dtnflow/test/integration/framework"
)

var env *framework.Env

func TestMain(m *testing.M) {
	// The managers' logs: errors only, unless DTNFLOW_TEST_LOG names a level
	// ("info", "debug" or a number) to follow a failing test.
	level := slog.LevelError
	switch os.Getenv("DTNFLOW_TEST_LOG") {
	case "":
	case "info":
		level = slog.LevelInfo
	default:
		level = slog.Level(-4)
	}
	ctrl.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))

	var err error
	env, err = framework.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the API server:", err)
	}
	os.Exit(code)
}
