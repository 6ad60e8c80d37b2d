// Package hack holds the repository's build scripts; its tests check that hack/deps.txt,
// the list make deps installs from, names every program the repository runs.
package hack

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// knownDynamic are the places that run a program the scan cannot name (key: "file:
// expression", as a failure prints it): what they run, and why. Programs named in runs
// are checked against hack/deps.txt like any other.
var knownDynamic = map[string]knownCommand{
	"agent/e2e/helpers_test.go: agentBin":                                                    {why: "the dtnflow-agent the test builds"},
	"agent/e2e/changed_test.go: agentBin":                                                    {why: "the dtnflow-agent the test builds, run as another user by setpriv"},
	"agent/wire/gmac_test.go: os.Args[0]":                                                    {why: "the package's own test binary, run again in FIPS 140-3 mode"},
	"optimizer/imports_test.go: goBin":                                                       {why: "go, found by exec.LookPath(\"go\") (scanned)"},
	"test/bench/peers/main.go: *agent":                                                       {why: "the dtnflow-agent make bench-peers builds"},
	"test/bench/peers/main.go: agentPath":                                                    {why: "the same dtnflow-agent"},
	"test/bench/peers/main.go: basePath":                                                     {why: "an earlier dtnflow-agent given with -baseline"},
	"test/bench/peers/main.go: cmd[0]":                                                       {runs: []string{"iperf3", "globus-url-copy"}, why: "the client command lines the contenders build with fixed(...), dtnflow-agent or a peer"},
	"test/bench/wan/dtnflow.go: d.Agent":                                                     {why: "the dtnflow-agent make bench-wan builds"},
	"test/bench/wan/sharing.go: e.opts.Agent":                                                {why: "the dtnflow-agent make bench-sharing-wan builds"},
	"test/e2e/cmd/bench-cluster/main.go: *agentBin":                                          {why: "the dtnflow-agent of the agent image (hack/images/build.sh)"},
	"test/e2e/chart/chart_test.go: bin":                                                      {why: "helm, built into bin/ by the Makefile"},
	"test/e2e/cluster/validation_test.go: cluster.KubectlBin":                                {why: "kubectl, built by hack/build-kube.sh"},
	"test/e2e/framework/cluster.go: c.KubectlBin":                                            {why: "kubectl, built by hack/build-kube.sh"},
	"test/e2e/framework/cluster.go: filepath.Join(RepoRoot(), \"hack/cluster/wan.sh\")":      {why: "a script of the repository (scanned)"},
	"test/e2e/framework/cluster.go: filepath.Join(RepoRoot(), path)":                         {why: "hack/cluster's up.sh and down.sh (scanned)"},
	"test/e2e/framework/sitepair.go: filepath.Join(RepoRoot(), \"hack\", \"pair-sites.sh\")": {why: "a script of the repository (scanned)"},
	"test/e2e/framework/cluster.go: \"--net=/run/netns/\" + nsName":                          {why: "nsenter's option: what it runs is a control plane component's own command line read from /proc (kube-apiserver, built by hack/build-kube.sh)"},
	"test/e2e/framework/process.go: args":                                                    {why: "nsenter's arguments: a cluster process (etcd, kube-apiserver, a kubelet, built by hack/build-kube.sh) restarted with the command line up.sh gave it"},
	"test/e2e/framework/process.go: p.argv":                                                  {why: "the same command line"},
	"test/e2e/framework/helm.go: helm":                                                       {why: "helm, built into bin/ by the Makefile"},
	"test/integration/controllers/bench_test.go: managerBinary(b)":                           {why: "the manager the benchmark builds"},
	"test/integration/plugin/kubectl_test.go: kubectlBin()":                                  {why: "kubectl, built by hack/build-kube.sh"},
	"test/topology/cmd/dfw-topo/main_test.go: os.Args[0]":                                    {why: "the test binary, run again as the command"},
	"test/topology/topology.go: c.args[0]":                                                   {runs: []string{"ip", "sysctl", "tc"}, why: "the host's command lines listed just above it"},
	"test/topology/topology.go: cmd.Path":                                                    {why: "re-runs a wanem.NetnsCommand (scanned) under the builder's context"},
	"test/topology/topology_test.go: os.Args[0]":                                             {why: "the test binary, run again as a helper process"},
	"test/wanem/cmd/wanem/main_test.go: os.Args[0]":                                          {why: "the test binary, run again as the wanem command"},
	"test/wanem/helpers_linux_test.go: cmd.Path":                                             {why: "re-runs a NetnsCommand (scanned) with a deadline"},
	"hack/deps_test.go: p":                                                                   {why: "looks the programs of hack/deps.txt up"},
	"hack/deps_test.go: filepath.Join(dir, \"deps.sh\")":                                     {why: "a copy of hack/deps.sh (scanned)"},
}

// notFromDebian are programs the repository runs that make deps deliberately does not
// install, and why.
var notFromDebian = map[string]string{
	"go":          "the Go toolchain (/usr/local/go), which the machine has: DEVELOPERS.md",
	"gofmt":       "part of the Go toolchain",
	"debootstrap": "hack/fresh-check.sh installs it itself: the tool of make check-fresh, not of any test",
}

type knownCommand struct {
	runs []string
	why  string
}

// skipDirs are not sources: caches, built tools, state of the local cluster.
var skipDirs = map[string]bool{".git": true, ".cache": true, "bin": true, ".local-cluster": true, "_artifacts": true, "node_modules": true}

var shebang = regexp.MustCompile(`^#!.*\b(ba|da)?sh\b`)

// repoSources returns the repository's Go sources, shell scripts (by suffix or
// shebang) and Makefile.
func repoSources(t *testing.T, root string) (module string, goSrcs, shellSrcs, makefiles []source) {
	t.Helper()
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	module = strings.TrimSpace(strings.TrimPrefix(strings.SplitN(string(mod), "\n", 2)[0], "module"))
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skipDirs[d.Name()] && p != root {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		switch {
		case strings.HasSuffix(rel, ".go"):
			goSrcs = append(goSrcs, source{rel, string(b)})
		case rel == "Makefile":
			makefiles = append(makefiles, source{rel, string(b)})
		case strings.HasSuffix(rel, ".sh") || shebang.Match(bytes.SplitN(b, []byte("\n"), 2)[0]):
			shellSrcs = append(shellSrcs, source{rel, string(b)})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return module, goSrcs, shellSrcs, makefiles
}

// scanRepo scans the repository this test runs in.
func scanRepo(t *testing.T) *repoScan {
	t.Helper()
	r, err := scanSources(repoSources(t, ".."))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestEveryProgramTheRepositoryRunsIsInTheManifest: a test, script or benchmark that
// runs a program whose package make deps does not install passes only on machines that
// happen to have it (ping on this one did not).
func TestEveryProgramTheRepositoryRunsIsInTheManifest(t *testing.T) {
	manifest, err := readManifest("deps.txt")
	if err != nil {
		t.Fatal(err)
	}
	r := scanRepo(t)
	// The scan must see the programs of the tests that failed on a fresh machine, or it
	// sees nothing: ping through topology.Host.Command and through ip netns exec.
	for _, want := range []string{"test/topology/topology_test.go", "test/wanem/cmd/wanem/main_test.go"} {
		if !strings.Contains(strings.Join(r.programs["ping"], " "), want) {
			t.Errorf("the scan did not find ping run by %s (found ping at %v)", want, r.programs["ping"])
		}
	}
	for _, p := range problems(r, withAllowed(manifest), knownDynamic) {
		t.Error(p)
	}
	t.Logf("%d programs run, %d dynamic commands, %d manifest entries", len(r.programs), len(r.dynamic), len(manifest))
}

// withAllowed is the manifest plus the programs that need no Debian package.
func withAllowed(m map[string]manifestEntry) map[string]manifestEntry {
	out := map[string]manifestEntry{}
	for k, v := range m {
		out[k] = v
	}
	for p, why := range notFromDebian {
		out[p] = manifestEntry{program: p, pkg: "-", why: why}
	}
	return out
}

// TestManifestNamesThePackageOfEachProgram asks dpkg which package owns each listed
// program that is installed here: a wrong package in hack/deps.txt would make make deps
// install something else and leave the program missing. (After make deps, as in
// make test, every one is installed and checked.)
func TestManifestNamesThePackageOfEachProgram(t *testing.T) {
	if _, err := exec.LookPath("dpkg"); err != nil {
		t.Skip("no dpkg: not a Debian machine")
	}
	manifest, err := readManifest("deps.txt")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{} // program → installed file
	var absent []string
	for _, p := range sortedKeys(manifest) {
		file := p
		if !filepath.IsAbs(p) {
			file, err = exec.LookPath(p)
		} else {
			_, err = os.Stat(p)
		}
		if err != nil {
			absent = append(absent, p)
			continue
		}
		files[p] = file
	}
	owners := dpkgOwners(slices.Collect(maps.Values(files)))
	for _, p := range sortedKeys(files) {
		e := manifest[p]
		if o := owners[files[p]]; !slices.Contains(o, e.pkg) {
			t.Errorf("deps.txt:%d: %s (%s) belongs to %v, not to %s", e.line, p, files[p], o, e.pkg)
		}
	}
	t.Logf("%d programs checked against dpkg; not installed here, so not checked: %v", len(files), absent)
}

// dpkgOwners returns the packages that own each file, trying the names dpkg may know it
// by: /usr-merged paths (/usr/bin/ip is /bin/ip to dpkg) and the target of a symlink
// (awk is an alternative for mawk). One dpkg -S for all of them.
func dpkgOwners(files []string) map[string][]string {
	aliases := map[string][]string{} // a name dpkg may know → the files it stands for
	for _, f := range files {
		names := []string{f, strings.TrimPrefix(f, "/usr")}
		if real, err := filepath.EvalSymlinks(f); err == nil {
			names = append(names, real, strings.TrimPrefix(real, "/usr"))
		}
		for _, n := range names {
			if !slices.Contains(aliases[n], f) {
				aliases[n] = append(aliases[n], f)
			}
		}
	}
	// dpkg -S fails when any name is unknown to it, and still prints the others.
	out, _ := exec.Command("dpkg", append([]string{"-S"}, sortedKeys(aliases)...)...).Output()
	owners := map[string][]string{}
	for _, line := range strings.Split(string(out), "\n") {
		pkgs, path, ok := strings.Cut(line, ": ")
		if !ok || strings.HasPrefix(line, "diversion ") {
			continue
		}
		for _, f := range aliases[path] {
			for _, p := range strings.Split(pkgs, ", ") {
				owners[f] = append(owners[f], strings.Split(p, ":")[0]) // iproute2:amd64 → iproute2
			}
		}
	}
	return owners
}

// depsScript runs a copy of hack/deps.sh with manifest as its list and a fake apt-get
// first on PATH that logs its arguments and, on install, creates the program install
// (when set). It returns the exit code, stderr and apt-get's log.
func depsScript(t *testing.T, manifest, install string, asUser bool) (int, string, string) {
	t.Helper()
	dir := t.TempDir()
	// readable by the unprivileged user too (t.TempDir and its parent are not)
	must(t, os.Chmod(filepath.Dir(dir), 0o755))
	must(t, os.Chmod(dir, 0o755))
	script, err := os.ReadFile("deps.sh")
	if err != nil {
		t.Fatal(err)
	}
	fakeBin := filepath.Join(dir, "bin")
	aptLog := filepath.Join(dir, "apt.log")
	must(t, os.Mkdir(fakeBin, 0o777))
	must(t, os.Chmod(fakeBin, 0o777))
	must(t, os.WriteFile(filepath.Join(dir, "deps.sh"), script, 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "deps.txt"), []byte(manifest), 0o644))
	must(t, os.WriteFile(filepath.Join(fakeBin, "apt-get"), []byte(`#!/bin/sh
echo "$*" >> "$APT_LOG"
case " $* " in *" install "*) if [ -n "$FAKE_INSTALL" ]; then printf '#!/bin/sh\n' > "$FAKE_INSTALL"; chmod +x "$FAKE_INSTALL"; fi ;; esac
`), 0o755))
	args := []string{filepath.Join(dir, "deps.sh")}
	if asUser {
		args = append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", "bash"}, args...)
	}
	name := "bash"
	if asUser {
		name = "setpriv"
	}
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "PATH="+fakeBin+":"+os.Getenv("PATH"), "DTNFLOW_DEPS_MANIFEST="+filepath.Join(dir, "deps.txt"),
		"APT_LOG="+aptLog, "FAKE_INSTALL="+install)
	if install != "" {
		cmd.Env = append(cmd.Env, "FAKE_INSTALL="+filepath.Join(fakeBin, install))
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	code := 0
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("%s: %v", name, err)
		}
		code = exit.ExitCode()
	}
	logged, _ := os.ReadFile(aptLog)
	return code, stderr.String(), string(logged)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestDepsScript runs hack/deps.sh against a fake apt-get: nothing when everything is
// there, update then a noninteractive install of the missing package, an error naming
// what is still missing after it, and the packages to install when not root.
func TestDepsScript(t *testing.T) {
	const present = "# a comment\nbash bash every script\n/bin/sh dash an absolute path\n"
	const missing = present + "dtnflow-fake-tool dtnflow-fake-pkg a test\n"
	if os.Geteuid() != 0 {
		t.Skip("needs root: as another user hack/deps.sh only reports (checked here as root through setpriv)")
	}

	code, stderr, apt := depsScript(t, present, "", false)
	if code != 0 || stderr != "" || apt != "" {
		t.Errorf("all present: exit %d, stderr %q, apt-get ran %q; want exit 0, silence, no apt-get", code, stderr, apt)
	}

	code, stderr, apt = depsScript(t, missing, "dtnflow-fake-tool", false)
	calls := strings.Split(strings.TrimSpace(apt), "\n")
	if code != 0 || len(calls) != 2 || !strings.Contains(calls[0], "update") ||
		!strings.HasSuffix(calls[1], "install -y -qq --no-install-recommends dtnflow-fake-pkg") {
		t.Errorf("one missing: exit %d, apt-get calls %q, stderr %q; want exit 0 after update then install of dtnflow-fake-pkg", code, calls, stderr)
	}
	if !strings.Contains(stderr, "installing dtnflow-fake-pkg (for dtnflow-fake-tool)") {
		t.Errorf("one missing: stderr %q does not say what it installs", stderr)
	}

	code, stderr, _ = depsScript(t, missing, "", false)
	if code == 0 || !strings.Contains(stderr, "still missing: dtnflow-fake-tool (dtnflow-fake-pkg)") {
		t.Errorf("install that installs nothing: exit %d, stderr %q; want a failure naming the program and package", code, stderr)
	}

	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Fatalf("setpriv (util-linux) is in hack/deps.txt: %v", err)
	}
	code, stderr, apt = depsScript(t, missing, "dtnflow-fake-tool", true)
	if code == 0 || apt != "" || !strings.Contains(stderr, "missing dtnflow-fake-tool; as root, run make deps or: apt-get install -y dtnflow-fake-pkg") {
		t.Errorf("not root: exit %d, apt-get ran %q, stderr %q; want a failure naming the package, and no apt-get", code, apt, stderr)
	}
}
