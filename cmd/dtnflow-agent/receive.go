package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/dtnflow/dtnflow/agent/fsroot"
	"github.com/dtnflow/dtnflow/agent/metrics"
	"github.com/dtnflow/dtnflow/agent/mover"
)

// runReceive is `dtnflow-agent receive`: it serves the senders of any number of jobs
// and writes what they send under --root.
func runReceive(ctx context.Context, args []string, log *slog.Logger) error {
	fs := newFlags("receive", "receive --listen ADDR --root DIR --secret-file FILE [--stripe K]")
	addr := fs.String("listen", "", "address senders connect to, for example :7000 (only the authenticated protocol is spoken there)")
	rootDir := fs.String("root", "", "destination root: every path written resolves under it")
	secretFile := fs.String("secret-file", "", "file holding the job's shared secret (at least 16 bytes)")
	stripe := fs.Int32("stripe", 0, "stripe index, for metrics and journal names")
	metricsAddr := fs.String("metrics-addr", metrics.DefaultAddr, metricsAddrUsage)
	maxFile := byteSize(mover.DefaultMaxFileSize)
	fs.Var(&maxFile, "max-file-size", "largest file a sender may announce")
	maxHandshakes := fs.Int("max-handshakes", mover.DefaultMaxHandshakes, "connections allowed in their handshake at once (more are closed and counted as busy)")
	requireEnc := fs.Bool("require-encryption", false, "refuse sessions that do not encrypt their data (in-flight mode Encrypted)")
	confine := fs.String("confine", "", "write only under this directory (relative to --root), whatever a sender asks")
	if err := parse(fs, args); err != nil {
		return err
	}
	confined := ""
	if *confine != "" {
		c, err := fsroot.Clean(*confine, false)
		if err != nil {
			return fmt.Errorf("--confine: %w", err)
		}
		confined = c
	}
	secret, err := loadSecret(*secretFile)
	if err != nil {
		return err
	}
	root, err := openRoot(*rootDir)
	if err != nil {
		return err
	}
	ln, err := listen(*addr)
	if err != nil {
		return err
	}
	r := &mover.Receiver{Root: root, Stripe: *stripe, Log: log, MaxFileSize: int64(maxFile), RequireEncryption: *requireEnc, Confine: confined,
		ID: fmt.Sprintf("%s-s%d-%d-%d", hostname(), *stripe, os.Getpid(), time.Now().UnixNano())}
	serveMetrics(ctx, *metricsAddr, r.Status, log)
	log.Info("Receiving", "listen", ln.Addr().String(), "root", *rootDir, "stripe", *stripe)
	return mover.Serve(ctx, ln, secret, *maxHandshakes, r.HandleConn, log)
}
