package hack

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// repoScan is what a scan of sources found: each program run, with where.
type repoScan struct {
	programs map[string][]string // program → file:line
	dynamic  map[string][]string // "file: expression" → file:line
}

// source is one file to scan.
type source struct {
	path string // relative to the repository
	text string
}

// scanSources finds the programs the Go sources, shell scripts and Makefile run.
func scanSources(module string, goSrcs, shellSrcs, makefiles []source) (*repoScan, error) {
	r := &repoScan{programs: map[string][]string{}, dynamic: map[string][]string{}}
	gs := &goScan{}
	for _, s := range goSrcs {
		f, err := parseGoFile(s.path, s.text, module)
		if err != nil {
			return nil, err
		}
		gs.files = append(gs.files, f)
	}
	gs.scan()

	sh := &shellScanState{functions: map[string]bool{}}
	for _, s := range shellSrcs {
		sh.add(s.path, s.text, 1)
	}
	for _, s := range makefiles {
		for _, recipe := range makeRecipes(s.text) {
			sh.add(s.path, recipe.src, recipe.line)
		}
	}
	for _, site := range gs.sites {
		for _, p := range site.found.programs {
			r.programs[p] = append(r.programs[p], site.where)
		}
		for _, d := range site.found.dynamic {
			key := site.file + ": " + d
			r.dynamic[key] = append(r.dynamic[key], site.where)
		}
		for _, script := range site.found.scripts {
			sh.add(strings.Split(site.where, ":")[0]+" (sh -c at line "+strings.Split(site.where, ":")[1]+")", script, 1)
		}
	}
	for p, where := range sh.programs() {
		r.programs[p] = append(r.programs[p], where...)
	}
	return r, nil
}

// shellScanState gathers the commands of every script before following the functions
// that run their arguments (lib.sh's start, in_netns, wait_for), used across files.
type shellScanState struct {
	commands  []shellCommand
	functions map[string]bool
}

func (s *shellScanState) add(file, src string, line int) {
	cmds, fns := parseShell(file, src, line)
	s.commands = append(s.commands, cmds...)
	for f := range fns {
		s.functions[f] = true
	}
}

// programs follows the functions that run "$@" (to a fixed point) and returns what
// every command runs. Scripts handed to sh -c are scanned in turn.
func (s *shellScanState) programs() map[string][]string {
	skips := map[string]int{}
	lookup := func(name string) (int, bool) {
		if !s.functions[name] {
			return 0, false
		}
		if k, ok := skips[name]; ok {
			return k, true
		}
		return -1, true
	}
	for changed := true; changed; {
		changed = false
		for _, c := range s.commands {
			if c.fn == "" {
				continue
			}
			if f := interpret(c.words, lookup); f.dollarAt {
				if k, ok := skips[c.fn]; !ok || c.shifts < k {
					skips[c.fn] = c.shifts
					changed = true
				}
			}
		}
	}
	out := map[string][]string{}
	for i := 0; i < len(s.commands); i++ {
		c := s.commands[i]
		f := interpret(c.words, lookup)
		for _, p := range f.programs {
			out[p] = append(out[p], c.where)
		}
		for _, script := range f.scripts {
			cmds, _ := parseShell(c.where+" (sh -c)", script, 1)
			s.commands = append(s.commands, cmds...)
		}
	}
	return out
}

// manifestEntry is one line of hack/deps.txt: a program, its Debian package ("-" when
// Debian does not provide it) and why it is there.
type manifestEntry struct {
	program, pkg, why string
	line              int
}

func readManifest(file string) (map[string]manifestEntry, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]manifestEntry{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 3 {
			return nil, fmt.Errorf("%s:%d: want \"program package why\", got %q", file, n, line)
		}
		if prev, ok := out[fields[0]]; ok {
			return nil, fmt.Errorf("%s:%d: %s is listed already at line %d", file, n, fields[0], prev.line)
		}
		out[fields[0]] = manifestEntry{program: fields[0], pkg: fields[1], why: strings.Join(fields[2:], " "), line: n}
	}
	return out, sc.Err()
}

// problems compares a scan with the manifest and the dynamic commands known to be
// fine: programs the manifest does not name, dynamic commands nobody looked at, and
// known dynamic commands that are no longer there.
func problems(r *repoScan, manifest map[string]manifestEntry, knownDynamic map[string]knownCommand) []string {
	var out []string
	programs := map[string][]string{}
	for p, where := range r.programs {
		programs[p] = where
	}
	for d, k := range knownDynamic {
		for _, p := range k.runs {
			programs[p] = append(programs[p], r.dynamic[d]...)
		}
	}
	for _, p := range sortedKeys(programs) {
		if _, ok := manifest[p]; ok {
			continue
		}
		if _, ok := manifest[filepath.Base(p)]; ok && strings.HasPrefix(p, "/") {
			continue
		}
		out = append(out, fmt.Sprintf("%s is run (%s) but hack/deps.txt does not name its package", p, places(programs[p])))
	}
	for _, d := range sortedKeys(r.dynamic) {
		if _, ok := knownDynamic[d]; !ok {
			out = append(out, fmt.Sprintf("%s runs %s, which the scan cannot name: run a literal program name, or add %q to knownDynamic saying why its program needs no package",
				places(r.dynamic[d]), d[strings.Index(d, ": ")+2:], d))
		}
	}
	for _, d := range sortedKeys(knownDynamic) {
		if _, ok := r.dynamic[d]; !ok {
			out = append(out, fmt.Sprintf("knownDynamic has %q, which no source runs any more: remove it", d))
		}
	}
	return out
}

func places(where []string) string {
	seen := map[string]bool{}
	var uniq []string
	for _, w := range where {
		if !seen[w] {
			seen[w] = true
			uniq = append(uniq, w)
		}
	}
	where = uniq
	sort.Strings(where)
	if len(where) > 3 {
		return strings.Join(where[:3], ", ") + " and " + strconv.Itoa(len(where)-3) + " more"
	}
	return strings.Join(where, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
