// Command dtnflow-agent is dtnflow's data mover. See `dtnflow-agent help`.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"
)

const usage = `dtnflow-agent moves datasets between data transfer nodes: parallel TCP streams,
stripes, pipelined small files, every frame authenticated (AES-GMAC), end-to-end
digests (BLAKE3 by default), resume.

Usage:
  dtnflow-agent receive    --listen :7000 --root DIR --secret-file FILE
  dtnflow-agent send       --to HOST:PORT --root DIR --secret-file FILE [flags] PATH...
  dtnflow-agent send       --mem --to HOST:PORT --secret-file FILE --streams N [--duration 10s | --bytes N]
  dtnflow-agent send       --stripe K --coordinator HOST:PORT --receiver HOST:PORT --root DIR --secret-file FILE
  dtnflow-agent coordinate --listen :7100 --root DIR --secret-file FILE --path P... [--pod NS/NAME]
  dtnflow-agent standby    --pod NS/NAME   (a warm agent: waits for its claim, then runs it)
  dtnflow-agent probe      --to HOST:PORT --secret-file FILE [--streams 1,2,4,8] [--seconds 3]
  dtnflow-agent plan       [--in samples.json]

Run 'dtnflow-agent COMMAND --help' for a command's flags.
`

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	if p := os.Getenv("DTNFLOW_CPUPROFILE"); p != "" {
		// A developer's aid: profile this process into the named file.
		if f, err := os.Create(p); err == nil {
			pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	memProfile := os.Getenv("DTNFLOW_MEMPROFILE")
	if memProfile != "" {
		// A developer's aid: every allocation's stack, sampled, written at exit.
		runtime.MemProfileRate = 64 << 10
		defer writeAllocProfile(memProfile)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "receive":
		err = runReceive(ctx, os.Args[2:], log)
	case "send":
		err = runSend(ctx, os.Args[2:], log)
	case "coordinate":
		err = runCoordinate(ctx, os.Args[2:], log)
	case "standby":
		err = runStandby(ctx, os.Args[2:], log)
	case "probe":
		err = runProbe(ctx, os.Args[2:], log)
	case "plan":
		err = runPlan(ctx, os.Args[2:], log)
	case "help", "-h", "--help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		pprof.StopCPUProfile()
		if memProfile != "" {
			writeAllocProfile(memProfile) // os.Exit below skips the deferred one
		}
		if err == errUsage {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "dtnflow-agent:", err)
		var partial *errPartial
		if errors.As(err, &partial) {
			os.Exit(exitPartial)
		}
		os.Exit(1)
	}
}

// writeAllocProfile writes the allocations sampled so far to the named file.
func writeAllocProfile(name string) {
	if f, err := os.Create(name); err == nil {
		pprof.Lookup("allocs").WriteTo(f, 0)
		f.Close()
	}
}
