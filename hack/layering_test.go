package hack

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/dtnflow/dtnflow/"

// layers says which of the module's packages each layer may import (by path prefix,
// under the module): api → optimizer → planning → controllers / agent → cmd. A package
// matches the longest prefix listed.
var layers = map[string][]string{
	"api":                  {"api"},
	"optimizer":            {"optimizer"},
	"agent":                {"agent", "optimizer"},
	"agent/contract":       {"agent/contract"},
	"controllers":          {"controllers", "api", "optimizer", "agent/contract"},
	"controllers/planning": {"controllers/planning", "api", "optimizer", "agent/contract"},
	"controllers/metrics":  {"controllers/metrics", "api"},
	"internal":             {"internal", "optimizer"}, // helpers of the binaries (progress bars)
	"cmd":                  {""},                      // the binaries' mains may use everything
	"hack":                 {""},
	"test":                 {""},
}

// TestLayering checks every non-test import of the module's packages against layers,
// so that the agent never again imports the controllers' planning (it did, through its
// optimize subcommand), nothing imports a main, and the optimizer stays free of the API.
func TestLayering(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		rule, allowed := "", []string(nil)
		for prefix, a := range layers {
			if within(pkg, prefix) && len(prefix) > len(rule) {
				rule, allowed = prefix, a
			}
		}
		if rule == "" {
			if pkg != strings.TrimSuffix(module, "/") {
				t.Errorf("%s: in no layer; add it to layers", pkg)
			} else {
				t.Errorf("the module root holds a package (%s): mains live under cmd/", line)
			}
			continue
		}
		for _, imp := range fields[1:] {
			dep, ours := strings.CutPrefix(imp, module)
			if !ours {
				continue
			}
			if strings.HasPrefix(dep, "cmd/") && !strings.HasPrefix(pkg, "cmd/") {
				t.Errorf("%s imports %s: nothing outside cmd/ imports a binary's code", pkg, dep)
				continue
			}
			ok := false
			for _, a := range allowed {
				ok = ok || a == "" || within(dep, a)
			}
			if !ok {
				t.Errorf("%s (layer %s) imports %s, outside %v", pkg, rule, dep, allowed)
			}
		}
	}
}

// within says whether pkg is the package dir or one below it.
func within(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }
