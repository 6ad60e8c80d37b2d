// Command kubectl-dtnflow is the kubectl plugin of dtnflow: `kubectl dtnflow get`,
// `watch`, `describe`, `plot`, `logs`, `suspend`, `resume` and `rerun` on TransferJobs.
// Copy the binary onto PATH and kubectl finds it.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/dtnflow/dtnflow/cmd/kubectl-dtnflow/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(app.Main(ctx, os.Args[1:], os.Stdout, os.Stderr))
}
