package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/agent/contract/claim"
)

// podStates replays states of a pod to waitForClaim, as a watch would deliver them.
type podStates []map[string]string

func (s podStates) WaitFor(ctx context.Context, accept func(uid string, annotations map[string]string) (bool, error)) error {
	for _, a := range s {
		if done, err := accept("uid-1", a); done {
			return err
		}
	}
	return nil // the watch "ended" with the context
}

func TestStandbyTakesTheFirstClaimThatOpens(t *testing.T) {
	key := bytes.Repeat([]byte{9}, claim.KeySize)
	want := claim.Claim{Job: "ns/j", Role: contract.RoleReceiver, Args: contract.ReceiverArgs(0, 7001), Secret: []byte("s3cret")}
	sealed, err := claim.Seal(key, "uid-1", want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := waitForClaim(context.Background(), podStates{
		{},                                 // as created
		{"other": "x"},                     // another annotation
		{contract.AnnotationClaim: ""},     // an empty one
		{contract.AnnotationClaim: sealed}, // the claim
	}, key)
	if err != nil || got == nil || got.Job != "ns/j" || !slices.Equal(got.Args, want.Args) {
		t.Fatalf("got %+v, %v", got, err)
	}

	got, err = waitForClaim(context.Background(), podStates{{}, {"other": "x"}}, key)
	if got != nil || err != nil {
		t.Fatalf("no claim: got %+v, %v", got, err)
	}
}

// A claim sealed for another pod (copied from it), with another key, or altered, makes
// the agent exit with an error instead of running it or waiting on.
func TestStandbyRefusesAClaimNotForIt(t *testing.T) {
	key := bytes.Repeat([]byte{9}, claim.KeySize)
	c := claim.Claim{Job: "ns/j", Role: contract.RoleSender, Args: contract.SenderArgs(0, "a:1", "b:2"), Secret: []byte("s")}
	forOther, _ := claim.Seal(key, "uid-2", c)
	otherKey, _ := claim.Seal(bytes.Repeat([]byte{8}, claim.KeySize), "uid-1", c)
	for name, sealed := range map[string]string{"another pod's": forOther, "another key's": otherKey, "junk": "AAAA"} {
		got, err := waitForClaim(context.Background(), podStates{{contract.AnnotationClaim: sealed}}, key)
		if got != nil || err == nil {
			t.Errorf("%s: got %+v, %v", name, got, err)
		}
		if name != "junk" && !errors.Is(err, claim.ErrNotForThisPod) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestStandbyWritesTheSecretOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "auth", "secret")
	if err := writeSecret(path, []byte("abc")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "abc" {
		t.Fatalf("read %q, %v", b, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o400 {
		t.Fatalf("mode %v, %v", fi.Mode(), err)
	}
	if err := writeSecret(path, []byte("other")); err == nil {
		t.Fatal("a second secret overwrote the first")
	}
}

func TestClaimedCommandSetsOnlyTheClaimsVariables(t *testing.T) {
	c := claim.Claim{Args: []string{"coordinate", "--listen", ":1"}, Env: map[string]string{contract.EnvInitialDirective: `{"generation":1}`}}
	argv, env := claimedCommand("dtnflow-agent", []string{"PATH=/bin", contract.EnvInitialDirective + "=old", "DTNFLOW_INITIAL_DIRECTIVEX=keep"}, c)
	if !slices.Equal(argv, []string{"dtnflow-agent", "coordinate", "--listen", ":1"}) {
		t.Errorf("argv %q", argv)
	}
	want := []string{"PATH=/bin", "DTNFLOW_INITIAL_DIRECTIVEX=keep", contract.EnvInitialDirective + `={"generation":1}`}
	if !slices.Equal(env, want) {
		t.Errorf("env %q, want %q", env, want)
	}
}
