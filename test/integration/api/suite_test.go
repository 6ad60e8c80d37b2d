// Package api tests the dtnflow.io/v1alpha1 API on a real kube-apiserver: the CRDs
// install, the samples are accepted, every check the CRDs declare (each bound, pattern,
// enum, required field and CEL rule, immutability included; coverage_test.go finds them
// in the generated CRDs) refuses what it should with a message that names the field and
// stores nothing, objects at their limits are accepted, and re-applying an unchanged
// manifest changes nothing.
package api

import (
	"fmt"
	"os"
	"testing"

	"github.com/dtnflow/dtnflow/test/integration/framework"
)

var env *framework.Env

func TestMain(m *testing.M) {
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
