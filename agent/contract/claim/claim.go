// Package claim is how the controller hands a warm agent (one started before any job,
// waiting in `dtnflow-agent standby`) its part in a job: the claim names the role, its
// command line and environment, and carries the job's shared secret.
//
// The claim travels in an annotation of the agent's own pod, which anybody allowed to
// edit pods in the namespace can write and anybody allowed to read them can read. So
// it is sealed (AES-256-GCM) with a key that only the controller and that one pod hold
// (the pod's own Secret, mounted as a file, which the controller made at random for it),
// and the pod's UID is authenticated with it: a claim cannot be read, forged, changed,
// or copied onto another warm pod. A claim copied back onto the same pod later finds
// no agent waiting: a warm agent takes one claim and becomes that job's agent.
package claim

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/dtnflow/dtnflow/agent/contract"
)

// KeySize is the size of a warm pod's key.
const KeySize = 32

// maxSecret bounds the job's secret a claim carries (the controller's are 32 bytes).
const maxSecret = 1024

// MaxSealed bounds the length of a sealed claim that Open reads: a pod annotation
// holds at most 256 KiB in all.
const MaxSealed = 64 << 10

// Claim is the warm agent's part in a job.
type Claim struct {
	// Job is the job's "namespace/name", for the agent's log.
	Job string `json:"job"`
	// Role is the agent the warm one becomes.
	Role contract.Role `json:"role"`
	// Args are the role's command line, as a job's own agent pod of that role is given
	// it (contract.CoordinatorArgs, SenderArgs, ReceiverArgsWith), first the command.
	Args []string `json:"args"`
	// Env are variables set for the role's process (only DTNFLOW_ ones, such as the
	// coordinator's initial directive).
	Env map[string]string `json:"env,omitempty"`
	// Secret is the job's shared secret: what a job's own pods read from the job's
	// Secret.
	Secret []byte `json:"secret"`
}

// commands are the command each role runs.
var commands = map[contract.Role]string{
	contract.RoleCoordinator: "coordinate",
	contract.RoleSender:      "send",
	contract.RoleReceiver:    "receive",
}

// Validate says what is wrong with a claim an agent must not run.
func (c Claim) Validate() error {
	cmd, ok := commands[c.Role]
	if !ok {
		return fmt.Errorf("claim: unknown role %q", c.Role)
	}
	if len(c.Args) == 0 || c.Args[0] != cmd {
		return fmt.Errorf("claim: a %s runs %q, not %q", c.Role, cmd, strings.Join(c.Args[:min(len(c.Args), 1)], ""))
	}
	if len(c.Secret) == 0 || len(c.Secret) > maxSecret {
		return fmt.Errorf("claim: a job secret of %d bytes (want 1 to %d)", len(c.Secret), maxSecret)
	}
	for name := range c.Env {
		if !strings.HasPrefix(name, "DTNFLOW_") || strings.ContainsAny(name, "=\x00") {
			return fmt.Errorf("claim: environment variable %q is not one of the agent's (DTNFLOW_*)", name)
		}
	}
	return nil
}

// NewKey returns a fresh random key for a warm pod.
func NewKey() ([]byte, error) {
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("reading random bytes for a warm agent's key: %w", err)
	}
	return key, nil
}

// additionalData binds a sealed claim to one pod and to this format.
func additionalData(podUID string) []byte {
	return []byte("dtnflow.io/claim/v1\x00" + podUID)
}

func aead(key []byte) (cipher.AEAD, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("claim: a key of %d bytes, want %d", len(key), KeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// Seal seals a valid claim for the pod of UID podUID with its key: the annotation's
// value.
func Seal(key []byte, podUID string, c Claim) (string, error) {
	return seal(key, podUID, c, rand.Reader)
}

// seal is Seal with the nonce read from random (a fixed one in tests).
func seal(key []byte, podUID string, c Claim, random io.Reader) (string, error) {
	if podUID == "" {
		return "", errors.New("claim: no pod UID to bind the claim to")
	}
	if err := c.Validate(); err != nil {
		return "", err
	}
	g, err := aead(key)
	if err != nil {
		return "", err
	}
	plain, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, g.NonceSize())
	if _, err := io.ReadFull(random, nonce); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(g.Seal(nonce, nonce, plain, additionalData(podUID))), nil
}

// ErrNotForThisPod is Open's answer for a claim that was not sealed for this pod with
// its key, or was changed since.
var ErrNotForThisPod = errors.New("claim: not sealed for this pod with its key, or altered")

// Open opens a sealed claim on the pod of UID podUID, and returns it only when it is
// authentic and valid.
func Open(key []byte, podUID string, sealed string) (Claim, error) {
	if len(sealed) > MaxSealed {
		return Claim{}, fmt.Errorf("claim: %d bytes sealed, more than %d", len(sealed), MaxSealed)
	}
	g, err := aead(key)
	if err != nil {
		return Claim{}, err
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(strings.TrimSpace(sealed))
	if err != nil {
		return Claim{}, fmt.Errorf("claim: not base64: %w", err)
	}
	if len(raw) < g.NonceSize()+g.Overhead() {
		return Claim{}, ErrNotForThisPod
	}
	plain, err := g.Open(nil, raw[:g.NonceSize()], raw[g.NonceSize():], additionalData(podUID))
	if err != nil {
		return Claim{}, ErrNotForThisPod
	}
	var c Claim
	dec := json.NewDecoder(strings.NewReader(string(plain)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Claim{}, fmt.Errorf("claim: %w", err)
	}
	if err := c.Validate(); err != nil {
		return Claim{}, err
	}
	return c, nil
}
