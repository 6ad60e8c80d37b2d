package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/dtnflow/dtnflow/agent/coord"
)

// probePlanner is the coordinator's probe sequence (the optimizer's ExpSelection).
func probePlanner() coord.ProbePlanner { return nil }

func autoTune(ctx context.Context, core *coord.Core, to string, secret []byte, j *jobFlags, log *slog.Logger) error {
	return errors.New("--auto: the optimizer is not integrated yet")
}

func runPlan(ctx context.Context, args []string, log *slog.Logger) error {
	return errors.New("plan: the planner is not integrated yet")
}
