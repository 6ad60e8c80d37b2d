package hack

import (
	"slices"
	"strings"
	"testing"
)

// A Go source that runs programs the ways the repository does: through a method that
// wraps nsenter and a function that wraps the method, over a literal list, through a
// variable assigned twice, ip netns exec, bash -c, a list of command lines, and a
// binary the scan cannot name.
const goCase = `package x

import (
	"context"
	"os/exec"
)

type Host struct{ Netns string }

func (h Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	enter := append([]string{"--net=" + h.Netns, "--", name}, args...)
	return exec.CommandContext(ctx, "nsenter", enter...)
}

func start(h Host, name string, args ...string) *exec.Cmd {
	return h.Command(context.Background(), name, args...)
}

func use(h Host, bin string) {
	start(h, "ping", "-c", "1")
	for _, tool := range []string{"iperf3", "xrdcp"} {
		exec.LookPath(tool)
	}
	rt := []string{}
	if bin != "" {
		rt = []string{"chrt", "-f", "5"}
	}
	exec.Command("nsenter", append(append([]string{"--net=/run/netns/a", "--"}, rt...), "rclone", "copy")...)
	exec.Command("ip", "netns", "exec", "a", "traceroute", "10.0.0.1")
	exec.Command("bash", "-c", "exec 3<>/dev/tcp/"+h.Netns+"; socat - <&3")
	for _, c := range [][]string{{"sysctl", "-w", "a=1"}, {"ethtool", "-K", "eth0"}} {
		exec.Command(c[0], c[1:]...)
	}
	exec.Command(h.Netns, "--version") // the scan cannot know what this runs
}
`

// A script that runs programs through functions that run their arguments, in a
// here-document's substitution, a case, a pipeline and a for loop; and mentions others
// it does not run (in a comment, as here-document text, in command -v).
const shellCase = `#!/usr/bin/env bash
# strace is only mentioned here
run_in() { local ns=$1; shift; nsenter --net="/run/netns/$ns" "$@"; }
retry() {
  local n=$1; shift
  until "$@"; do sleep 1; done
}
cat > f <<EOF
nmap $(hostname)
EOF
case $x in
  a) tcpdump -i x ;;
  *) : ;;
esac
retry 3 run_in ns arping -c 1 x
v=$(awk '{print}' f | xz -d)
for i in $(seq 3); do [[ -n $i && -z x ]] || stress; done
command -v lsof >/dev/null || echo "no lsof"
"$KBIN/kubectl" get pods
hack/cluster/up.sh
`

// A Makefile whose recipes run programs through env, flock and bash -c, with make's
// variables and $$.
const makeCase = "t:\n" +
	"\t@command -v foo >/dev/null || GOBIN=$(BIN) go install x@v1\n" +
	"\tenv $(ENV) X=1 flock /tmp/l bash -c '$(BIN)/tool; rc=$$?; \\\n" +
	"\t  lsblk; exit $$rc'\n"

func TestScanFindsWhatSourcesRun(t *testing.T) {
	r, err := scanSources("example.com/x",
		[]source{{"x/x.go", goCase}}, []source{{"s.sh", shellCase}}, []source{{"Makefile", makeCase}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"arping", "awk", "bash", "cat", "chrt", "env", "ethtool", "flock", "go", "hostname", "ip", "iperf3",
		"lsblk", "nsenter", "ping", "rclone", "seq", "sleep", "socat", "stress", "sysctl", "tcpdump",
		"traceroute", "xrdcp", "xz",
	}
	if got := sortedKeys(r.programs); !slices.Equal(got, want) {
		t.Errorf("programs:\n got %v\nwant %v", got, want)
	}
	if got := sortedKeys(r.dynamic); !slices.Equal(got, []string{"x/x.go: h.Netns"}) {
		t.Errorf("dynamic commands: got %v, want [x/x.go: h.Netns]", got)
	}
	if where := r.programs["ping"]; !slices.Equal(where, []string{"x/x.go:20"}) {
		t.Errorf("ping found at %v, want x/x.go:20 (the call that names it)", where)
	}
}

// TestProblemsNameWhatIsMissing: the repository's test fails, naming the program and
// where it runs, when the manifest lacks a program; and names unknown and stale
// dynamic commands.
func TestProblemsNameWhatIsMissing(t *testing.T) {
	r, err := scanSources("example.com/x", []source{{"x/x.go", goCase}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	manifest := map[string]manifestEntry{}
	for p := range r.programs {
		if p != "ping" {
			manifest[p] = manifestEntry{program: p, pkg: "pkg-of-" + p}
		}
	}
	known := map[string]knownCommand{"x/x.go: h.Netns": {why: "built"}}
	got := problems(r, manifest, known)
	if len(got) != 1 || !strings.HasPrefix(got[0], "ping is run (x/x.go:20) but hack/deps.txt does not name its package") {
		t.Errorf("ping missing from the manifest: got %q", got)
	}

	manifest["ping"] = manifestEntry{program: "ping", pkg: "iputils-ping"}
	if got := problems(r, manifest, known); len(got) != 0 {
		t.Errorf("complete manifest: got %q, want no problems", got)
	}
	got = problems(r, manifest, map[string]knownCommand{"x/x.go: gone": {why: "was here"}})
	if len(got) != 2 || !strings.Contains(got[0], "x/x.go:34 runs h.Netns, which the scan cannot name") ||
		!strings.Contains(got[1], `knownDynamic has "x/x.go: gone", which no source runs any more`) {
		t.Errorf("unknown and stale dynamic commands: got %q", got)
	}
	// a program a known dynamic command runs is checked too
	got = problems(r, manifest, map[string]knownCommand{"x/x.go: h.Netns": {runs: []string{"xrootd"}, why: "built"}})
	if len(got) != 1 || !strings.HasPrefix(got[0], "xrootd is run (x/x.go:34)") {
		t.Errorf("a known dynamic command's program missing from the manifest: got %q", got)
	}
}
