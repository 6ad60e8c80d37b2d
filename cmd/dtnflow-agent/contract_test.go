package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/dtnflow/dtnflow/agent/contract"
)

// TestContractCommandLines feeds the command lines the controller builds to the
// agent's flag parsing: every flag must be accepted. The commands then stop at the
// first thing this machine lacks (the mounted secret), which proves parsing passed.
func TestContractCommandLines(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	run := map[string]func(context.Context, []string, *slog.Logger) error{
		"coordinate": runCoordinate, "send": runSend, "receive": runReceive,
	}
	cases := map[string][]string{
		"coordinator": contract.CoordinatorArgs(7100, "ns/job-coordinator", contract.JobOptions{SourcePaths: []string{"a", "b/c"},
			DestinationPath: "in", Checksum: "SHA256", Verify: true, Overwrite: "IfDifferent"}),
		"coordinator, no verify": contract.CoordinatorArgs(7100, "ns/j", contract.JobOptions{SourcePaths: []string{"a"}, Checksum: "MD5", Overwrite: "Never"}),
		"coordinator, skipping source errors": contract.CoordinatorArgs(7100, "ns/j", contract.JobOptions{SourcePaths: []string{"a"}, Checksum: "SHA256",
			Overwrite: "IfDifferent", SourceErrors: contract.SourceErrorsSkip}),
		"sender":   contract.SenderArgs(3, "10.0.0.1:7100", "10.0.0.2:7000"),
		"receiver": contract.ReceiverArgs(3, 7000),
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			err := run[args[0]](ctx, args[1:], log)
			if err == nil || !strings.Contains(err.Error(), "secret file") {
				t.Fatalf("%v: got %v, want the flags accepted and a missing secret file", args, err)
			}
		})
	}
	if err := runSend(ctx, []string{"--no-such-flag"}, log); err == nil || !strings.Contains(err.Error(), "unknown flag") {
		t.Fatalf("an unknown flag was accepted: %v", err)
	}
}
