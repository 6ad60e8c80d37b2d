package hack

import (
	"regexp"
	"strconv"
	"strings"
)

// A shell scan reads bash the way the scripts under hack/ and test/ and the Makefile's
// recipes are written, well enough to find the first word of every command: quotes,
// $(...), <(...), here-documents (whose $(...) run too), functions, case, for, [[ ]],
// redirections and assignments. It does not expand variables: a command named by one
// ("$KBIN/kubectl") is something the repository built, not something Debian installs.

// shellCommand is one simple command of a script.
type shellCommand struct {
	words []word
	// fn is the function it is in ("" at top level) and shifts how many arguments that
	// function has shifted off before it.
	fn     string
	shifts int
	// where is "file:line".
	where string
}

type tokenKind int

const (
	tWord tokenKind = iota
	tOp
)

type shellToken struct {
	kind tokenKind
	w    word
	op   string
	line int
}

// shellLexer turns a script into tokens; the commands of $(...), `...`, <(...) and of
// here-documents are scripts of their own, kept in nested.
type shellLexer struct {
	src     string
	i       int
	line    int
	toks    []shellToken
	nested  []nestedScript
	heredoc []heredocWanted
}

type nestedScript struct {
	src  string
	line int
}

type heredocWanted struct {
	delim  string
	expand bool // unquoted delimiter: $(...) in the body runs
}

func lexShell(src string, firstLine int) *shellLexer {
	l := &shellLexer{src: src, line: firstLine}
	l.run()
	return l
}

func (l *shellLexer) peek(k int) byte {
	if l.i+k < len(l.src) {
		return l.src[l.i+k]
	}
	return 0
}

func (l *shellLexer) op(s string) {
	l.toks = append(l.toks, shellToken{kind: tOp, op: s, line: l.line})
	l.i += len(s)
}

var redirection = regexp.MustCompile(`^[0-9]*(&>>|&>|>>|>&|>\||<<<|<<-|<<|<&|<>|>|<)`)

func (l *shellLexer) run() {
	for l.i < len(l.src) {
		c := l.src[l.i]
		switch {
		case c == '\\' && l.peek(1) == '\n':
			l.i += 2
			l.line++
		case c == ' ' || c == '\t' || c == '\r':
			l.i++
		case c == '\n':
			l.op("\n")
			l.line++
			l.readHeredocs()
		case c == '#':
			for l.i < len(l.src) && l.src[l.i] != '\n' {
				l.i++
			}
		case (c == '<' || c == '>') && l.peek(1) == '(':
			// process substitution: a script of its own, and an argument (a file name)
			end := closeParen(l.src, l.i+2)
			l.nested = append(l.nested, nestedScript{l.src[l.i+2 : end], l.line})
			l.toks = append(l.toks, shellToken{kind: tWord, w: word{param: -1, src: l.src[l.i : end+1]}, line: l.line})
			l.i = end + 1
		case redirection.MatchString(l.src[l.i:]) && (c < '0' || c > '9' || l.startsToken()):
			op := redirection.FindString(l.src[l.i:])
			l.i += len(op)
			l.redirect(strings.TrimLeft(op, "0123456789"))
		case strings.HasPrefix(l.src[l.i:], ";;&"):
			l.op(";;&")
		case strings.HasPrefix(l.src[l.i:], ";;"), strings.HasPrefix(l.src[l.i:], ";&"),
			strings.HasPrefix(l.src[l.i:], "&&"), strings.HasPrefix(l.src[l.i:], "||"),
			strings.HasPrefix(l.src[l.i:], "|&"):
			l.op(l.src[l.i : l.i+2])
		case c == ';' || c == '&' || c == '|' || c == '(' || c == ')':
			l.op(string(c))
		default:
			line := l.line
			w := l.word()
			l.toks = append(l.toks, shellToken{kind: tWord, w: w, line: line})
		}
	}
}

// startsToken: digits before < or > are a file descriptor only at a token's start.
func (l *shellLexer) startsToken() bool {
	if l.i == 0 {
		return true
	}
	switch l.src[l.i-1] {
	case ' ', '\t', '\n', ';', '&', '|', '(', ')':
		return true
	}
	return false
}

// redirect reads what a redirection needs after its operator: a file name (ignored), a
// here-document's delimiter, or nothing for a descriptor copy (>&2, 9>&-).
func (l *shellLexer) redirect(op string) {
	if (op == ">&" || op == "<&") && l.i < len(l.src) && (l.src[l.i] == '-' || (l.src[l.i] >= '0' && l.src[l.i] <= '9')) {
		for l.i < len(l.src) && (l.src[l.i] == '-' || (l.src[l.i] >= '0' && l.src[l.i] <= '9')) {
			l.i++
		}
		return
	}
	for l.i < len(l.src) && (l.src[l.i] == ' ' || l.src[l.i] == '\t') {
		l.i++
	}
	w := l.word()
	if op == "<<" || op == "<<-" {
		l.heredoc = append(l.heredoc, heredocWanted{delim: w.text, expand: !strings.ContainsAny(w.src, `'"\`)})
	}
}

// readHeredocs skips the bodies of the here-documents opened on the line just ended;
// an unquoted delimiter's body runs its $(...).
func (l *shellLexer) readHeredocs() {
	for _, h := range l.heredoc {
		for l.i < len(l.src) {
			end := strings.IndexByte(l.src[l.i:], '\n')
			if end < 0 {
				end = len(l.src) - l.i
			}
			body := l.src[l.i : l.i+end]
			l.i += end + 1
			l.line++
			if strings.TrimLeft(body, "\t") == h.delim {
				break
			}
			for k := 0; h.expand && k < len(body); k++ {
				if body[k] == '\\' {
					k++
				} else if strings.HasPrefix(body[k:], "$((") {
					k = closeParen(body, k+3) + 1
				} else if strings.HasPrefix(body[k:], "$(") {
					e := closeParen(body, k+2)
					l.nested = append(l.nested, nestedScript{body[k+2 : e], l.line - 1})
					k = e
				}
			}
		}
	}
	l.heredoc = nil
}

// word reads one word: its unquoted text, whether all of it is literal, and the
// commands of the substitutions in it.
func (l *shellLexer) word() word {
	start := l.i
	var text strings.Builder
	literal := true
	for l.i < len(l.src) {
		c := l.src[l.i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ';' || c == '&' || c == '|' ||
			c == '<' || c == '>' || c == ')':
			return l.finishWord(start, text.String(), literal)
		case c == '(':
			// NAME=(...) and NAME+=(...) are one word (an array assignment)
			if assignment.MatchString(text.String()) && strings.HasSuffix(text.String(), "=") {
				end := closeParen(l.src, l.i+1)
				text.WriteString(l.src[l.i : end+1])
				literal = false
				l.i = end + 1
				continue
			}
			return l.finishWord(start, text.String(), literal)
		case c == '\\':
			if l.i+1 < len(l.src) {
				if l.src[l.i+1] == '\n' {
					l.line++
				} else {
					text.WriteByte(l.src[l.i+1])
				}
			}
			l.i += 2
		case c == '\'':
			end := strings.IndexByte(l.src[l.i+1:], '\'')
			if end < 0 {
				end = len(l.src) - l.i - 1
			}
			s := l.src[l.i+1 : l.i+1+end]
			text.WriteString(s)
			l.line += strings.Count(s, "\n")
			l.i += end + 2
		case c == '"':
			l.i++
			for l.i < len(l.src) && l.src[l.i] != '"' {
				switch d := l.src[l.i]; {
				case d == '\\' && l.i+1 < len(l.src):
					text.WriteByte(l.src[l.i+1])
					l.i += 2
				case d == '$' || d == '`':
					literal = false
					text.WriteString(l.expansion())
				default:
					if d == '\n' {
						l.line++
					}
					text.WriteByte(d)
					l.i++
				}
			}
			l.i++
		case c == '$' || c == '`':
			literal = false
			text.WriteString(l.expansion())
		default:
			text.WriteByte(c)
			l.i++
		}
	}
	return l.finishWord(start, text.String(), literal)
}

func (l *shellLexer) finishWord(start int, text string, literal bool) word {
	src := l.src[start:l.i]
	w := word{text: text, literal: literal, param: -1, src: src}
	w.dollarAt = src == `"$@"` || src == `$@` || src == `"${@}"`
	return w
}

// expansion reads a $-expansion or a `...` at l.i and returns its source text; the
// commands of $(...) and `...` are kept as nested scripts.
func (l *shellLexer) expansion() string {
	start := l.i
	switch {
	case l.src[l.i] == '`':
		end := strings.IndexByte(l.src[l.i+1:], '`')
		if end < 0 {
			end = len(l.src) - l.i - 1
		}
		l.nested = append(l.nested, nestedScript{l.src[l.i+1 : l.i+1+end], l.line})
		l.i += end + 2
	case strings.HasPrefix(l.src[l.i:], "$(("):
		l.i = closeParen(l.src, l.i+3) + 1
		if l.i < len(l.src) && l.src[l.i] == ')' {
			l.i++
		}
	case strings.HasPrefix(l.src[l.i:], "$("):
		end := closeParen(l.src, l.i+2)
		l.nested = append(l.nested, nestedScript{l.src[l.i+2 : end], l.line})
		l.i = end + 1
	case strings.HasPrefix(l.src[l.i:], "${"):
		depth := 0
		for l.i < len(l.src) {
			if l.src[l.i] == '{' {
				depth++
			} else if l.src[l.i] == '}' {
				depth--
				if depth == 0 {
					l.i++
					break
				}
			}
			l.i++
		}
	default:
		l.i++ // the $
		if l.i < len(l.src) && strings.IndexByte("@*#?$!-0123456789", l.src[l.i]) >= 0 {
			l.i++
		} else {
			for l.i < len(l.src) && (l.src[l.i] == '_' || l.src[l.i] >= 'a' && l.src[l.i] <= 'z' ||
				l.src[l.i] >= 'A' && l.src[l.i] <= 'Z' || l.src[l.i] >= '0' && l.src[l.i] <= '9') {
				l.i++
			}
		}
	}
	l.line += strings.Count(l.src[start:l.i], "\n")
	return l.src[start:l.i]
}

// closeParen returns the index of the ) that closes the ( before i, skipping quotes.
func closeParen(s string, i int) int {
	depth := 1
	for ; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '\'':
			if e := strings.IndexByte(s[i+1:], '\''); e >= 0 {
				i += e + 1
			}
		case '"':
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' {
					i++
				} else if strings.HasPrefix(s[i:], "$(") {
					i = closeParen(s, i+2)
				}
			}
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return len(s)
}

// parseShell returns the simple commands of a script (nested ones included) and the
// names of the functions it defines.
func parseShell(file, src string, firstLine int) ([]shellCommand, map[string]bool) {
	l := lexShell(src, firstLine)
	p := &shellParser{file: file, functions: map[string]bool{}, shifts: map[string]int{}}
	p.parse(l.toks)
	for _, n := range l.nested {
		cmds, fns := parseShell(file, n.src, n.line)
		for _, c := range cmds {
			if c.fn == "" { // a substitution inside a function runs with its arguments
				c.fn = p.fnAt(n.line)
				c.shifts = p.shiftsAt(c.fn, n.line)
			}
			p.commands = append(p.commands, c)
		}
		for f := range fns {
			p.functions[f] = true
		}
	}
	return p.commands, p.functions
}

type shellParser struct {
	file      string
	commands  []shellCommand
	functions map[string]bool
	// functions' bodies by line, for the substitutions inside them
	bodies      []fnBody
	shifts      map[string]int
	shiftEvents []shiftEvent
}

type fnBody struct {
	name       string
	start, end int
}

func (p *shellParser) fnAt(line int) string {
	for _, b := range p.bodies {
		if line >= b.start && line <= b.end {
			return b.name
		}
	}
	return ""
}

// shiftsAt is how many arguments function fn has shifted off before line.
func (p *shellParser) shiftsAt(fn string, line int) int {
	n := 0
	for _, s := range p.shiftEvents {
		if s.fn == fn && s.line < line {
			n += s.n
		}
	}
	return n
}

type shiftEvent struct {
	fn      string
	line, n int
}

type parseMode int

const (
	mCommand parseMode = iota
	mForHeader
	mCaseHeader
	mCasePattern
	mDoubleBracket
)

func (p *shellParser) parse(toks []shellToken) {
	var words []word
	line := 0
	mode := mCommand
	cases := 0
	braces := 0
	type openFn struct {
		name  string
		depth int
		start int
	}
	var fns []openFn
	pendingFn := ""
	current := func() string {
		if len(fns) == 0 {
			return ""
		}
		return fns[len(fns)-1].name
	}
	end := func() {
		if len(words) == 0 {
			return
		}
		fn := current()
		p.commands = append(p.commands, shellCommand{words: words, fn: fn, shifts: p.shifts[fn], where: p.file + ":" + strconv.Itoa(line)})
		if fn != "" && words[0].literal && words[0].text == "shift" {
			n := 1
			if len(words) > 1 {
				if k, err := strconv.Atoi(words[1].text); err == nil {
					n = k
				}
			}
			p.shifts[fn] += n
			p.shiftEvents = append(p.shiftEvents, shiftEvent{fn, line, n})
		}
		words = nil
	}
	for k := 0; k < len(toks); k++ {
		t := toks[k]
		if t.kind == tOp {
			switch {
			case mode == mForHeader || mode == mCaseHeader || mode == mDoubleBracket:
			case mode == mCasePattern:
				if t.op == ")" {
					mode = mCommand
				}
			case t.op == "(" && len(words) == 1 && k+1 < len(toks) && toks[k+1].kind == tOp && toks[k+1].op == ")":
				pendingFn = words[0].text
				p.functions[pendingFn] = true
				words = nil
				k++
			case t.op == ";;" || t.op == ";&" || t.op == ";;&":
				end()
				if cases > 0 {
					mode = mCasePattern
				}
			default:
				end()
			}
			continue
		}
		w := t.w
		switch mode {
		case mForHeader:
			if w.literal && w.text == "do" {
				mode = mCommand
			}
			continue
		case mCaseHeader:
			if w.literal && w.text == "in" {
				mode = mCasePattern
			}
			continue
		case mDoubleBracket:
			if w.literal && w.text == "]]" {
				mode = mCommand
			}
			continue
		case mCasePattern:
			if w.literal && w.text == "esac" {
				cases--
				mode = mCommand
			}
			continue
		}
		if len(words) == 0 {
			line = t.line
			if w.literal {
				switch w.text {
				case "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "time":
					continue
				case "for", "select":
					mode = mForHeader
					continue
				case "case":
					mode = mCaseHeader
					cases++
					continue
				case "esac":
					cases--
					continue
				case "[[":
					mode = mDoubleBracket
					continue
				case "function":
					if k+1 < len(toks) && toks[k+1].kind == tWord {
						pendingFn = toks[k+1].w.text
						p.functions[pendingFn] = true
						k++
					}
					continue
				case "{":
					if pendingFn != "" {
						fns = append(fns, openFn{name: pendingFn, depth: braces, start: t.line})
						pendingFn = ""
					}
					braces++
					continue
				case "}":
					braces--
					if len(fns) > 0 && fns[len(fns)-1].depth == braces {
						f := fns[len(fns)-1]
						p.bodies = append(p.bodies, fnBody{f.name, f.start, t.line})
						fns = fns[:len(fns)-1]
					}
					continue
				}
			}
			if assignment.MatchString(w.src) {
				continue
			}
		}
		words = append(words, w)
	}
	end()
}

// makeRecipes returns the recipe lines of a Makefile as one shell script per line
// (continuations joined), with make's $(VAR) as $MAKEVAR and $$ as $.
func makeRecipes(src string) []nestedScript {
	var out []nestedScript
	lines := strings.Split(src, "\n")
	for n := 0; n < len(lines); n++ {
		if !strings.HasPrefix(lines[n], "\t") {
			continue
		}
		first := n
		recipe := strings.TrimPrefix(lines[n], "\t")
		for strings.HasSuffix(recipe, "\\") && n+1 < len(lines) {
			n++
			recipe = strings.TrimSuffix(recipe, "\\") + " " + strings.TrimLeft(lines[n], "\t")
		}
		recipe = strings.TrimLeft(recipe, "@-+ ")
		out = append(out, nestedScript{src: makeToShell(recipe), line: first + 1})
	}
	return out
}

// makeToShell replaces make's variable references by $MAKEVAR and $$ by $.
func makeToShell(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case strings.HasPrefix(s[i:], "$$"):
			b.WriteByte('$')
			i++
		case strings.HasPrefix(s[i:], "$(") || strings.HasPrefix(s[i:], "${"):
			depth := 0
			for ; i < len(s); i++ {
				if s[i] == '(' || s[i] == '{' {
					depth++
				} else if s[i] == ')' || s[i] == '}' {
					depth--
					if depth == 0 {
						break
					}
				}
			}
			b.WriteString("$MAKEVAR")
		case s[i] == '$' && i+1 < len(s):
			b.WriteString("$MAKEVAR") // $@, $<, $^
			i++
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}
