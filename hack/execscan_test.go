package hack

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"path"
	"strconv"
	"strings"
)

// A Go scan finds the programs Go code runs: the first argument of exec.Command,
// exec.CommandContext and exec.LookPath, followed through the repository's own
// wrappers. A function that runs one of its parameters as a program (wanem.NetnsCommand,
// topology.Host.Command, a benchmark's start) is a wrapper, and its callers name the
// program. Values are followed through string constants, local variables, append,
// []string{...}, indexing and ranging over literal lists; a program named by anything
// else (a built binary, os.Args[0], an exec.Cmd's Path) is reported as dynamic.

type goFile struct {
	path    string // relative to the repository
	dir     string // relative directory: the package
	fset    *token.FileSet
	ast     *ast.File
	imports map[string]string // local name → directory in the repository ("" if outside)
	execPkg string            // the local name of os/exec, if imported
}

// wrapperKey names a function that may wrap exec: a function or method by package
// directory and name, or a function literal by position.
type wrapperKey struct {
	dir    string
	method bool
	name   string
	lit    token.Pos
}

// goSite is one place where a program is run.
type goSite struct {
	where string // file:line
	file  string
	found found
}

type goScan struct {
	files    []*goFile
	wrappers map[wrapperKey]map[int]bool
	sites    []goSite
}

// parseGoFile reads one source; module is the module path of go.mod.
func parseGoFile(rel, src, module string) (*goFile, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, rel, src, 0)
	if err != nil {
		return nil, err
	}
	gf := &goFile{path: rel, dir: path.Dir(rel), fset: fset, ast: f, imports: map[string]string{}}
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		name := path.Base(p)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		dir := ""
		if p == module {
			dir = "."
		} else if strings.HasPrefix(p, module+"/") {
			dir = strings.TrimPrefix(p, module+"/")
		}
		gf.imports[name] = dir
		if p == "os/exec" {
			gf.execPkg = name
		}
	}
	return gf, nil
}

// scan finds the wrappers (until no new one turns up) and then every site.
func (s *goScan) scan() {
	s.wrappers = map[wrapperKey]map[int]bool{}
	for round := 0; ; round++ {
		before := s.count()
		s.sites = nil
		for _, f := range s.files {
			s.walkFile(f)
		}
		if s.count() == before || round > 8 {
			return
		}
	}
}

func (s *goScan) count() int {
	n := 0
	for _, ps := range s.wrappers {
		n += len(ps)
	}
	return n
}

// fnCtx is the function a call is in: its key and its parameters.
type fnCtx struct {
	key    wrapperKey
	params map[*ast.Object]int
	body   *ast.BlockStmt
	outer  *fnCtx
	// following are the variables being followed now: x = append(x, ...) must end.
	following map[*ast.Object]bool
}

func newFnCtx(key wrapperKey, typ *ast.FuncType, body *ast.BlockStmt, outer *fnCtx) *fnCtx {
	c := &fnCtx{key: key, params: map[*ast.Object]int{}, body: body, outer: outer, following: map[*ast.Object]bool{}}
	if outer != nil {
		c.following = outer.following
	}
	i := 0
	for _, field := range typ.Params.List {
		if len(field.Names) == 0 {
			i++
		}
		for _, n := range field.Names {
			if n.Obj != nil {
				c.params[n.Obj] = i
			}
			i++
		}
	}
	return c
}

func (s *goScan) walkFile(f *goFile) {
	for _, d := range f.ast.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		key := wrapperKey{dir: f.dir, method: fd.Recv != nil, name: fd.Name.Name}
		s.walk(f, fd.Body, newFnCtx(key, fd.Type, fd.Body, nil))
	}
}

func (s *goScan) walk(f *goFile, n ast.Node, ctx *fnCtx) {
	ast.Inspect(n, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			s.walk(f, n.Body, newFnCtx(wrapperKey{lit: n.Pos(), dir: f.path}, n.Type, n.Body, ctx))
			return false
		case *ast.CallExpr:
			s.call(f, n, ctx)
		}
		return true
	})
}

// call records what a call runs when it is exec's or a wrapper's.
func (s *goScan) call(f *goFile, call *ast.CallExpr, ctx *fnCtx) {
	where := f.fset.Position(call.Pos())
	site := func(args []ast.Expr, lookPath bool) {
		if len(args) == 0 {
			return
		}
		var fd found
		for _, alt := range expandArgs(args, call.Ellipsis.IsValid(), ctx) {
			var r found
			if lookPath {
				r = interpret(alt[:1], nil)
				r.scripts = nil
			} else {
				r = interpret(alt, nil)
			}
			fd.programs = append(fd.programs, r.programs...)
			fd.params = append(fd.params, r.params...)
			fd.dynamic = append(fd.dynamic, r.dynamic...)
			fd.scripts = append(fd.scripts, r.scripts...)
		}
		for _, p := range fd.params {
			if s.wrappers[ctx.key] == nil {
				s.wrappers[ctx.key] = map[int]bool{}
			}
			s.wrappers[ctx.key][p] = true
		}
		s.sites = append(s.sites, goSite{where: f.path + ":" + strconv.Itoa(where.Line), file: f.path, found: fd})
	}
	if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
		if x, ok := sel.X.(*ast.Ident); ok && f.execPkg != "" && x.Name == f.execPkg && x.Obj == nil {
			switch sel.Sel.Name {
			case "Command":
				site(call.Args, false)
			case "CommandContext":
				if len(call.Args) > 1 {
					site(call.Args[1:], false)
				}
			case "LookPath":
				site(call.Args, true)
			}
			return
		}
	}
	for _, key := range s.callees(f, call) {
		for p := range s.wrappers[key] {
			if p < len(call.Args) {
				site(call.Args[p:], false)
			}
		}
	}
}

// callees are the wrappers a call may be calling.
func (s *goScan) callees(f *goFile, call *ast.CallExpr) []wrapperKey {
	switch fun := call.Fun.(type) {
	case *ast.Ident:
		if fun.Obj != nil {
			if lit := funcLitOf(fun.Obj); lit != nil {
				return []wrapperKey{{lit: lit.Pos(), dir: f.path}}
			}
			if fun.Obj.Kind != ast.Fun {
				return nil
			}
		}
		return []wrapperKey{{dir: f.dir, name: fun.Name}}
	case *ast.SelectorExpr:
		if x, ok := fun.X.(*ast.Ident); ok && x.Obj == nil {
			if dir, ok := f.imports[x.Name]; ok {
				if dir == "" {
					return nil
				}
				return []wrapperKey{{dir: dir, name: fun.Sel.Name}}
			}
		}
		// a method: of a type of this package or of a package of the repository it imports
		keys := []wrapperKey{{dir: f.dir, method: true, name: fun.Sel.Name}}
		for _, dir := range f.imports {
			if dir != "" {
				keys = append(keys, wrapperKey{dir: dir, method: true, name: fun.Sel.Name})
			}
		}
		return keys
	}
	return nil
}

func funcLitOf(obj *ast.Object) *ast.FuncLit {
	switch d := obj.Decl.(type) {
	case *ast.AssignStmt:
		for i, l := range d.Lhs {
			if id, ok := l.(*ast.Ident); ok && id.Obj == obj && i < len(d.Rhs) {
				lit, _ := d.Rhs[i].(*ast.FuncLit)
				return lit
			}
		}
	case *ast.ValueSpec:
		for i, n := range d.Names {
			if n.Obj == obj && i < len(d.Values) {
				lit, _ := d.Values[i].(*ast.FuncLit)
				return lit
			}
		}
	}
	return nil
}

// maxAlternatives bounds the command lines one call may expand to.
const maxAlternatives = 64

// expandArgs returns the command lines a call's arguments may make.
func expandArgs(args []ast.Expr, ellipsis bool, ctx *fnCtx) [][]word {
	lines := [][]word{nil}
	for i, a := range args {
		var alts [][]word
		if ellipsis && i == len(args)-1 {
			alts = sequences(a, ctx, true)
		} else {
			alts = values(a, ctx)
		}
		lines = product(lines, alts)
	}
	return lines
}

func product(a, b [][]word) [][]word {
	var out [][]word
	for _, x := range a {
		for _, y := range b {
			if len(out) == maxAlternatives {
				return out
			}
			line := append(append([]word(nil), x...), y...)
			out = append(out, line)
		}
	}
	return out
}

func dynamic(e ast.Expr, spread bool) word {
	return word{param: -1, spread: spread, src: types.ExprString(e)}
}

// values returns the values one expression (a string) may have, each as a one-word line.
func values(e ast.Expr, ctx *fnCtx) [][]word {
	switch e := e.(type) {
	case *ast.BasicLit:
		if s, err := strconv.Unquote(e.Value); err == nil && e.Kind == token.STRING {
			return [][]word{{lit(s)}}
		}
	case *ast.ParenExpr:
		return values(e.X, ctx)
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			x, y := values(e.X, ctx), values(e.Y, ctx)
			if len(x) == 1 && len(y) == 1 {
				a, b := x[0][0], y[0][0]
				if a.literal && b.literal {
					return [][]word{{lit(a.text + b.text)}}
				}
				// what is known of it, for scripts and options ("--net=" + path)
				return [][]word{{{text: known(a) + known(b), param: -1, src: types.ExprString(e)}}}
			}
		}
	case *ast.Ident:
		if p, ok := paramOf(e, ctx); ok {
			return [][]word{{{param: p, src: e.Name}}}
		}
		if out := assigned(e, ctx, false); out != nil {
			return out
		}
	case *ast.IndexExpr:
		k, err := strconv.Atoi(litText(e.Index))
		if err == nil {
			var out [][]word
			for _, seq := range sequences(e.X, ctx, false) {
				if k < len(seq) && !anySpread(seq[:k+1]) {
					out = append(out, []word{seq[k]})
				} else {
					return [][]word{{dynamic(e, false)}}
				}
			}
			if out != nil {
				return out
			}
		}
	}
	return [][]word{{dynamic(e, false)}}
}

// sequences returns the word lists a []string expression may hold.
func sequences(e ast.Expr, ctx *fnCtx, spread bool) [][]word {
	switch e := e.(type) {
	case *ast.ParenExpr:
		return sequences(e.X, ctx, spread)
	case *ast.CompositeLit:
		// {"ip", "link", ...} in a [][]string has no type of its own
		if at, ok := e.Type.(*ast.ArrayType); ok || e.Type == nil {
			if id, ok := elemType(at); e.Type == nil || ok && id.Name == "string" {
				lines := [][]word{nil}
				for _, el := range e.Elts {
					lines = product(lines, values(el, ctx))
				}
				return lines
			}
		}
	case *ast.CallExpr:
		if id, ok := e.Fun.(*ast.Ident); ok && id.Name == "append" && id.Obj == nil && len(e.Args) > 0 {
			lines := sequences(e.Args[0], ctx, true)
			for i, a := range e.Args[1:] {
				if e.Ellipsis.IsValid() && i == len(e.Args)-2 {
					lines = product(lines, sequences(a, ctx, true))
				} else {
					lines = product(lines, values(a, ctx))
				}
			}
			return lines
		}
	case *ast.SliceExpr:
		lo, err := strconv.Atoi(litText(e.Low))
		if err == nil && e.High == nil {
			var out [][]word
			for _, seq := range sequences(e.X, ctx, spread) {
				if lo <= len(seq) && !anySpread(seq[:lo]) {
					out = append(out, seq[lo:])
				} else {
					return [][]word{{dynamic(e, spread)}}
				}
			}
			return out
		}
	case *ast.Ident:
		if _, ok := paramOf(e, ctx); ok {
			return [][]word{{{param: -1, spread: true, src: e.Name}}} // a parameter's list: its callers'
		}
		if out := assigned(e, ctx, true); out != nil {
			return out
		}
	}
	// a list the scan cannot know is of unknown length too
	return [][]word{{dynamic(e, true)}}
}

// known is a word's text with what is not known of it as a shell expansion.
func known(w word) string {
	if w.literal || w.text != "" {
		return w.text
	}
	return "$X"
}

func elemType(at *ast.ArrayType) (*ast.Ident, bool) {
	if at == nil {
		return nil, false
	}
	id, ok := at.Elt.(*ast.Ident)
	return id, ok
}

func anySpread(ws []word) bool {
	for _, w := range ws {
		if w.spread {
			return true
		}
	}
	return false
}

func litText(e ast.Expr) string {
	if b, ok := e.(*ast.BasicLit); ok {
		return b.Value
	}
	return ""
}

func paramOf(id *ast.Ident, ctx *fnCtx) (int, bool) {
	if id.Obj == nil {
		return 0, false
	}
	for c := ctx; c != nil; c = c.outer {
		if p, ok := c.params[id.Obj]; ok {
			if c == ctx {
				return p, true
			}
			return 0, false // a parameter of an outer function: not this one's caller's
		}
	}
	return 0, false
}

// assigned follows a local variable or constant to the values assigned to it (every
// assignment in the function, so `rt := []string{}` then `rt = []string{"chrt", ...}`
// gives both), and a range variable to the elements of the literal ranged over.
func assigned(id *ast.Ident, ctx *fnCtx, seq bool) [][]word {
	obj := id.Obj
	if obj == nil || ctx.following[obj] {
		return nil
	}
	ctx.following[obj] = true
	defer delete(ctx.following, obj)
	eval := func(e ast.Expr) [][]word {
		if seq {
			return sequences(e, ctx, true)
		}
		return values(e, ctx)
	}
	var out [][]word
	switch d := obj.Decl.(type) {
	case *ast.ValueSpec:
		for i, n := range d.Names {
			if n.Obj == obj && i < len(d.Values) {
				out = append(out, eval(d.Values[i])...)
			}
		}
	case *ast.AssignStmt:
		if len(d.Rhs) == 1 {
			if u, ok := d.Rhs[0].(*ast.UnaryExpr); ok && u.Op == token.RANGE {
				// for _, v := range <literal>: v is each element in turn
				if len(d.Lhs) < 2 || d.Lhs[1].(*ast.Ident).Obj != obj {
					return nil
				}
				lit, ok := u.X.(*ast.CompositeLit)
				if !ok {
					return nil
				}
				for _, el := range lit.Elts {
					if seq {
						out = append(out, sequences(el, ctx, false)...)
					} else {
						out = append(out, values(el, ctx)...)
					}
				}
				return out
			}
		}
	default:
		return nil
	}
	// every assignment to it in the function's body
	for c := ctx; c != nil; c = c.outer {
		ast.Inspect(c.body, func(n ast.Node) bool {
			a, ok := n.(*ast.AssignStmt)
			if !ok || len(a.Lhs) != len(a.Rhs) {
				return true
			}
			for i, l := range a.Lhs {
				if l, ok := l.(*ast.Ident); ok && l.Obj == obj {
					out = append(out, eval(a.Rhs[i])...)
				}
			}
			return true
		})
	}
	if len(out) > maxAlternatives {
		out = out[:maxAlternatives]
	}
	return out
}
