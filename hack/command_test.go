package hack

import (
	"path"
	"regexp"
	"strings"
)

// word is one argument of a command line found in a source: a shell word or a Go
// expression that becomes one argument of exec.Command.
type word struct {
	// text is the word's value when literal is set; otherwise its text with what is
	// not known left as $-expansions (or empty).
	text    string
	literal bool
	// dollarAt is the shell's "$@": inside a function, the function's own arguments.
	dollarAt bool
	// param is the index of the enclosing Go function's parameter this word is, or -1.
	param int
	// spread is a Go slice of unknown length spread into the arguments (args...).
	spread bool
	// src is what the source says, for messages and the list of known dynamic commands.
	src string
}

func lit(s string) word { return word{text: s, literal: true, param: -1, src: s} }

// script is the word as the text of a shell script: its value, with what the scan could
// not know in it left as $-expansions.
func (w word) script() string {
	if w.text != "" {
		return w.text
	}
	return w.src
}

// found is what one command line runs.
type found struct {
	// programs are the programs it runs by name (or by absolute path).
	programs []string
	// params are the enclosing Go function's parameters that it runs as a program: the
	// function is then a wrapper whose callers name the program.
	params []int
	// dollarAt says it runs the shell function's arguments as a command.
	dollarAt bool
	// dynamic are the words it runs whose value the scan cannot know (a built binary, the
	// test binary itself, a command line built elsewhere).
	dynamic []string
	// scripts are shell scripts it hands to sh -c or bash -c.
	scripts []string
}

// shellBuiltins run inside the shell: no program is executed for them. Reserved words
// the parser does not take apart are here too.
var shellBuiltins = map[string]bool{
	":": true, ".": true, "[": true, "[[": true, "alias": true, "break": true, "builtin": true,
	"cd": true, "command": true, "continue": true, "declare": true, "echo": true, "eval": true,
	"exec": true, "exit": true, "export": true, "false": true, "getopts": true, "hash": true,
	"jobs": true, "kill": true, "let": true, "local": true, "mapfile": true, "printf": true,
	"pwd": true, "read": true, "readarray": true, "readonly": true, "return": true, "set": true,
	"shift": true, "source": true, "test": true, "times": true, "trap": true, "true": true,
	"type": true, "typeset": true, "ulimit": true, "umask": true, "unset": true, "wait": true,
	"disown": true, "{": true, "}": true, "]]": true,
}

var assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=`)

// commandRunners are programs that run another program named in their arguments: how
// many words to skip (options and their values, positional arguments) before it.
// Each returns the index of the command's first word in w, or -1 when there is none.
var commandRunners = map[string]func(w []word) int{
	"nsenter":     afterOptions("-t", "--target", "-S", "--setuid", "-G", "--setgid", "-w", "--wd", "-W"),
	"unshare":     afterOptions("--propagation", "-S", "--setuid", "-G", "--setgid", "-R", "--root", "-w", "--wd"),
	"setsid":      afterOptions(),
	"nohup":       afterOptions(),
	"stdbuf":      afterOptions("-i", "-o", "-e"),
	"sudo":        afterOptions("-u", "-g"),
	"xargs":       afterOptions("-a", "-d", "-E", "-I", "-L", "-n", "-P", "-s"),
	"nice":        afterOptions("-n", "--adjustment"),
	"ionice":      afterOptions("-c", "-n", "-p"),
	"chrt":        skipPositional(afterOptions(), 1), // chrt [options] priority command
	"taskset":     skipPositional(afterOptions(), 1), // taskset [options] mask command
	"chroot":      skipPositional(afterOptions(), 1), // chroot newroot command
	"timeout":     skipPositional(afterOptions("-s", "--signal", "-k", "--kill-after"), 1),
	"flock":       skipPositional(afterOptions("-w", "--timeout", "-E", "--conflict-exit-code"), 1),
	"env":         envCommand,
	"ip":          ipNetnsExec,
	"time":        afterOptions("-f", "--format", "-o", "--output"),
	"watch":       afterOptions("-n", "--interval", "-d"),
	"strace":      afterOptions("-e", "-o", "-p", "-s"),
	"setpriv":     afterOptions(),
	"runuser":     afterOptions("-u", "-g"),
	"systemd-run": afterOptions("-p", "--property", "--unit", "-u"),
}

// afterOptions skips options (and the values of those named) up to the command; "--"
// ends the options. A shell array expansion among the options ("${opts[@]}") is taken
// for options too.
func afterOptions(withValue ...string) func(w []word) int {
	takesValue := map[string]bool{}
	for _, o := range withValue {
		takesValue[o] = true
	}
	return func(w []word) int {
		for i := 1; i < len(w); i++ {
			switch {
			case w[i].literal && w[i].text == "--":
				return i + 1
			case strings.HasPrefix(w[i].text, "-"): // literal, or one whose start is ("--net=" + path)
				if w[i].literal && takesValue[w[i].text] {
					i++
				}
			case !w[i].literal && strings.Contains(w[i].src, "[@]"):
			default:
				return i
			}
		}
		return -1
	}
}

// skipPositional skips n positional arguments after the options.
func skipPositional(opts func(w []word) int, n int) func(w []word) int {
	return func(w []word) int {
		i := opts(w)
		if i < 0 || i+n >= len(w) {
			return -1
		}
		return i + n
	}
}

// envCommand: env [options] [NAME=value ...] command.
func envCommand(w []word) int {
	for i := 1; i < len(w); i++ {
		switch {
		case w[i].literal && (w[i].text == "-u" || w[i].text == "--unset" || w[i].text == "-C" || w[i].text == "--chdir"):
			i++
		case strings.HasPrefix(w[i].text, "-"):
		case assignment.MatchString(w[i].text):
		case w[i].src == "$MAKEVAR": // a make variable holding NAME=value pairs
		default:
			return i
		}
	}
	return -1
}

// ipNetnsExec: ip netns exec <name> command.
func ipNetnsExec(w []word) int {
	if len(w) > 4 && w[1].literal && w[1].text == "netns" && w[2].literal && w[2].text == "exec" {
		return 4
	}
	return -1
}

// runners tells whether a name is a shell function, and if that function runs its
// arguments after the first skip as a command, skip (else -1).
type runners func(name string) (skip int, isFunction bool)

// interpret says what a command line runs, following programs that run other programs
// (nsenter, ip netns exec, sh -c ...) and the shell functions that do.
func interpret(w []word, fns runners) found {
	var f found
	for len(w) > 0 {
		first := w[0]
		switch {
		case first.dollarAt:
			f.dollarAt = true
			return f
		case first.param >= 0:
			f.params = append(f.params, first.param)
			return f
		case !first.literal:
			f.dynamic = append(f.dynamic, first.src)
			return f
		}
		name := first.text
		switch {
		case name == "exec" || name == "builtin" || name == "command":
			// `command -v x` looks x up without running it; `command x` and `exec x` run it.
			rest := w[1:]
			for len(rest) > 0 && rest[0].literal && strings.HasPrefix(rest[0].text, "-") {
				if name == "command" && (rest[0].text == "-v" || rest[0].text == "-V") {
					return f
				}
				rest = rest[1:]
			}
			w = rest
			continue
		case shellBuiltins[name]:
			return f
		case fns != nil:
			if skip, ok := fns(name); ok {
				if skip < 0 || 1+skip >= len(w) {
					return f
				}
				w = w[1+skip:]
				continue
			}
		}
		if strings.Contains(name, "/") && !strings.HasPrefix(name, "/") {
			return f // a script or binary of the repository (./bin/..., hack/...)
		}
		f.programs = append(f.programs, name)
		base := path.Base(name)
		if base == "sh" || base == "bash" || base == "dash" {
			for i := 1; i < len(w); i++ {
				if w[i].literal && w[i].text == "-c" {
					if i+1 < len(w) {
						f.scripts = append(f.scripts, w[i+1].script())
					}
					break
				}
				if !w[i].literal || !strings.HasPrefix(w[i].text, "-") {
					break // a script file: scanned on its own when it is the repository's
				}
			}
			return f
		}
		next, ok := commandRunners[base]
		if !ok {
			return f
		}
		i := next(w)
		if i < 0 || i >= len(w) {
			return f
		}
		w = w[i:]
	}
	return f
}
