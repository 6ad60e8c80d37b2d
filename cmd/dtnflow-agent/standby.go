package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/agent/contract/claim"
	"github.com/dtnflow/dtnflow/agent/coord"
)

// runStandby is `dtnflow-agent standby`: a warm agent, started before any job. It
// waits for the controller's claim on its own pod, opens it with its pod's key, writes
// the job's secret where the role reads it, and replaces itself with the role's command
// (exec: the same process, cgroup and pod), so that the job's agent starts without a
// pod of its own to start.
func runStandby(ctx context.Context, args []string, log *slog.Logger) error {
	fs := newFlags("standby", "standby --pod NS/NAME [--key-file FILE] [--secret-file FILE]")
	pod := fs.String("pod", "", "namespace/name of this agent's pod, which the claim is written to")
	keyFile := fs.String("key-file", contract.WarmKeyMountPath+"/"+contract.WarmKey, "file holding this pod's own key, which the claim is sealed with")
	secretFile := fs.String("secret-file", contract.SecretMountPath+"/"+contract.SecretKey, "where to write the claiming job's secret (a memory-backed volume)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *pod == "" {
		return errors.New("--pod is required: the claim is written to this agent's pod")
	}
	key, err := os.ReadFile(*keyFile)
	if err != nil {
		return fmt.Errorf("reading the pod's key: %w", err)
	}
	api, err := coord.InClusterAPI()
	if err != nil {
		return fmt.Errorf("standby needs the in-cluster API server: %w", err)
	}
	pc, err := coord.NewPodChannel(api, *pod)
	if err != nil {
		return err
	}
	log.Info("Waiting for a job", "pod", *pod)
	c, err := waitForClaim(ctx, pc, key)
	if err != nil {
		return err
	}
	if c == nil {
		return ctx.Err() // stopped before any job claimed it
	}
	log.Info("Claimed", "job", c.Job, "role", c.Role)
	if err := writeSecret(*secretFile, c.Secret); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	argv, env := claimedCommand(os.Args[0], os.Environ(), *c)
	return syscall.Exec(exe, argv, env)
}

// claimWaiter is what waitForClaim needs of the pod: its states as they come.
type claimWaiter interface {
	WaitFor(ctx context.Context, accept func(uid string, annotations map[string]string) (bool, error)) error
}

// waitForClaim returns the first claim written to the pod; nil when ctx ends first. A
// claim that does not open (another key, another pod's, altered) is an error: the agent
// exits, and its pod is replaced, rather than wait for a claim it may never get.
func waitForClaim(ctx context.Context, pod claimWaiter, key []byte) (*claim.Claim, error) {
	var got *claim.Claim
	err := pod.WaitFor(ctx, func(uid string, annotations map[string]string) (bool, error) {
		sealed, ok := annotations[contract.AnnotationClaim]
		if !ok || sealed == "" {
			return false, nil
		}
		c, err := claim.Open(key, uid, sealed)
		if err != nil {
			return true, fmt.Errorf("the claim on pod (uid %s): %w", uid, err)
		}
		got = &c
		return true, nil
	})
	return got, err
}

// writeSecret writes the job's secret to a file that must not exist yet, readable by
// this user only.
func writeSecret(path string, secret []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o400)
	if err != nil {
		return fmt.Errorf("writing the job's secret: %w", err)
	}
	if _, err := f.Write(secret); err != nil {
		f.Close()
		return fmt.Errorf("writing the job's secret: %w", err)
	}
	return f.Close()
}

// claimedCommand is the command line and environment the claimed role runs with: the
// claim's arguments after the program's name, and its variables over the inherited ones.
func claimedCommand(program string, environ []string, c claim.Claim) (argv, env []string) {
	argv = append([]string{program}, c.Args...)
	env = slices.DeleteFunc(slices.Clone(environ), func(kv string) bool {
		for name := range c.Env {
			if len(kv) > len(name) && kv[:len(name)+1] == name+"=" {
				return true
			}
		}
		return false
	})
	for _, name := range slices.Sorted(maps.Keys(c.Env)) {
		env = append(env, name+"="+c.Env[name])
	}
	return argv, env
}
