package claim

import (
	"bytes"
	"encoding/base64"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/dtnflow/dtnflow/agent/contract"
)

func testKey(b byte) []byte { return bytes.Repeat([]byte{b}, KeySize) }

func senderClaim() Claim {
	return Claim{
		Job:    "ns/job",
		Role:   contract.RoleSender,
		Args:   contract.SenderArgs(0, "10.0.0.1:9000", "10.0.0.2:9001"),
		Secret: bytes.Repeat([]byte{7}, 32),
	}
}

func TestSealedClaimOpensOnlyOnItsPodWithItsKey(t *testing.T) {
	c := senderClaim()
	c.Env = map[string]string{contract.EnvInitialDirective: `{"generation":1}`}
	c.Role, c.Args = contract.RoleCoordinator, contract.CoordinatorArgs(9000, "ns/warm-1", contract.JobOptions{SourcePaths: []string{"a"}})
	sealed, err := Seal(testKey(1), "uid-1", c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Open(testKey(1), "uid-1", sealed)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Fatalf("opened %+v, sealed %+v", got, c)
	}
	if _, err := Open(testKey(1), "uid-2", sealed); !errors.Is(err, ErrNotForThisPod) {
		t.Errorf("another pod opened the claim: %v", err)
	}
	if _, err := Open(testKey(2), "uid-1", sealed); !errors.Is(err, ErrNotForThisPod) {
		t.Errorf("another key opened the claim: %v", err)
	}
	again, err := Seal(testKey(1), "uid-1", c)
	if err != nil {
		t.Fatal(err)
	}
	if again == sealed {
		t.Error("two seals of one claim are equal: the nonce is not fresh")
	}
}

// Every bit of a sealed claim matters: a flipped bit anywhere (nonce, ciphertext,
// tag) and a claim cut short are refused, never opened as another claim.
func TestEveryAlteredBitIsRefused(t *testing.T) {
	sealed, err := Seal(testKey(3), "uid", senderClaim())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(sealed)
	if err != nil {
		t.Fatal(err)
	}
	for i := range raw {
		for bit := range 8 {
			alt := bytes.Clone(raw)
			alt[i] ^= 1 << bit
			if c, err := Open(testKey(3), "uid", base64.StdEncoding.EncodeToString(alt)); err == nil {
				t.Fatalf("byte %d bit %d flipped: opened %+v", i, bit, c)
			}
		}
	}
	for n := range len(raw) {
		if c, err := Open(testKey(3), "uid", base64.StdEncoding.EncodeToString(raw[:n])); err == nil {
			t.Fatalf("cut to %d bytes: opened %+v", n, c)
		}
	}
}

func TestClaimsAnAgentMustNotRunAreNotSealed(t *testing.T) {
	for name, change := range map[string]func(*Claim){
		"unknown role":           func(c *Claim) { c.Role = "admin" },
		"another role's command": func(c *Claim) { c.Args[0] = "receive" },
		"no command":             func(c *Claim) { c.Args = nil },
		"a probe instead":        func(c *Claim) { c.Args = []string{"probe"} },
		"no secret":              func(c *Claim) { c.Secret = nil },
		"a huge secret":          func(c *Claim) { c.Secret = make([]byte, maxSecret+1) },
		"a foreign variable":     func(c *Claim) { c.Env = map[string]string{"LD_PRELOAD": "/tmp/x.so"} },
		"a variable with =":      func(c *Claim) { c.Env = map[string]string{"DTNFLOW_A=B": "x"} },
		"a variable with NUL":    func(c *Claim) { c.Env = map[string]string{"DTNFLOW_\x00": "x"} },
		"lower-case look-alike":  func(c *Claim) { c.Env = map[string]string{"dtnflow_x": "x"} },
		"a path to escape PATH":  func(c *Claim) { c.Env = map[string]string{"PATH": "/tmp"} },
	} {
		t.Run(name, func(t *testing.T) {
			c := senderClaim()
			change(&c)
			if _, err := Seal(testKey(1), "uid", c); err == nil {
				t.Fatal("sealed")
			}
		})
	}
	if _, err := Seal(testKey(1), "", senderClaim()); err == nil {
		t.Error("sealed for no pod")
	}
	if _, err := Seal(make([]byte, 16), "uid", senderClaim()); err == nil {
		t.Error("sealed with a 16-byte key")
	}
}

func TestOpenRefusesWhatIsNotASealedClaim(t *testing.T) {
	for name, sealed := range map[string]string{
		"empty":        "",
		"not base64":   "!!!",
		"too long":     string(bytes.Repeat([]byte{'A'}, MaxSealed+4)),
		"plain JSON":   `{"role":"sender"}`,
		"short":        base64.StdEncoding.EncodeToString([]byte("abc")),
		"padding only": "====",
	} {
		if c, err := Open(testKey(1), "uid", sealed); err == nil {
			t.Errorf("%s: opened %+v", name, c)
		}
	}
}

func FuzzOpen(f *testing.F) {
	// one nonce, so that every fuzzing process seals the same bytes
	sealed, err := seal(testKey(5), "uid", senderClaim(), bytes.NewReader(make([]byte, 12)))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(sealed, 0, byte(0))
	f.Add(sealed, 20, byte(1))
	f.Add("", 0, byte(0))
	f.Fuzz(func(t *testing.T, s string, at int, xor byte) {
		if len(s) > 0 && at >= 0 {
			b := []byte(s)
			b[at%len(b)] ^= xor
			s = string(b)
		}
		c, err := Open(testKey(5), "uid", s)
		if err != nil {
			return
		}
		// only the one claim sealed with this key opens: the seed, unaltered
		raw, _ := base64.StdEncoding.DecodeString(sealed)
		alt, _ := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
		if !bytes.Equal(raw, alt) {
			t.Fatalf("opened %q as %+v", s, c)
		}
		if !reflect.DeepEqual(c, senderClaim()) {
			t.Fatalf("opened %+v", c)
		}
	})
}
