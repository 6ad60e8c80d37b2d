package hack

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestHostClaim runs hack/cluster/claim-test.sh: the local cluster's host-wide claim takes
// down a dead cluster's debris (the CI failure "RTNETLINK answers: File exists" when a
// killed run had left the bridge behind), refuses or waits for a live one without
// touching it, and is released only by its owner. The script works on names of its own
// (prefix dtx-), so it runs beside a live local cluster.
func TestHostClaim(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces and cgroups")
	}
	out, err := exec.Command("cluster/claim-test.sh").CombinedOutput()
	if err != nil {
		t.Fatalf("hack/cluster/claim-test.sh: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "claim-test: all passed") {
		t.Fatalf("claim-test.sh ended without passing every case:\n%s", out)
	}
	t.Logf("%s", out)
}
