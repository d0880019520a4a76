package gregor

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestLocksDocumented keeps LOCKS.md true: every sync.Mutex or
// sync.RWMutex field of a struct in the module (outside tests) is listed
// under "Every lock" as `dir.Type.field`, and every lock named anywhere in
// LOCKS.md still exists. A lock added without a place in the order, or a
// rule about a lock that is gone, fails here.
func TestLocksDocumented(t *testing.T) {
	inCode, err := mutexFields(".")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("LOCKS.md")
	if err != nil {
		t.Fatal(err)
	}
	listed := listedLocks(t, string(doc))
	for name, where := range inCode {
		if !listed[name] {
			t.Errorf("%s (%s) is not listed under \"Every lock\" in LOCKS.md", name, where)
		}
	}
	for _, name := range namedLocks(string(doc)) {
		if _, ok := inCode[name]; !ok {
			t.Errorf("LOCKS.md names %s, which is not a mutex field in the code", name)
		}
	}
}

// mutexFields returns "dir.Type.field" → file for every mutex field of a
// struct type in the non-test Go files under root, where dir is the
// package's directory relative to root (compat, a module of its own, and
// testdata are skipped).
func mutexFields(root string) (map[string]string, error) {
	found := map[string]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (name == "compat" || name == "testdata" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return true
			}
			for _, field := range st.Fields.List {
				if !isMutex(field.Type) {
					continue
				}
				names := []string{}
				for _, id := range field.Names {
					names = append(names, id.Name)
				}
				if len(names) == 0 { // embedded: the field is named after its type
					names = append(names, "Mutex")
				}
				for _, fieldName := range names {
					found[dir+"."+ts.Name.Name+"."+fieldName] = path
				}
			}
			return true
		})
		return nil
	})
	return found, err
}

// isMutex reports whether a field's type is sync.Mutex, sync.RWMutex or a
// pointer to one.
func isMutex(e ast.Expr) bool {
	if star, ok := e.(*ast.StarExpr); ok {
		e = star.X
	}
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "sync" && (sel.Sel.Name == "Mutex" || sel.Sel.Name == "RWMutex")
}

// lockName matches a lock as LOCKS.md writes it: `dir.Type.field`, the
// dir with slashes for nested packages (`broker/producerstate.IDAllocator.mu`).
var lockName = regexp.MustCompile("`([a-z][a-z0-9_/]*\\.[A-Za-z][A-Za-z0-9_]*\\.[A-Za-z][A-Za-z0-9_]*)`")

// listedLocks returns the locks listed as bullets under the "## Every lock"
// heading.
func listedLocks(t *testing.T, doc string) map[string]bool {
	_, section, ok := strings.Cut(doc, "\n## Every lock\n")
	if !ok {
		t.Fatal(`LOCKS.md has no "## Every lock" section`)
	}
	if next := strings.Index(section, "\n## "); next >= 0 {
		section = section[:next]
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "- ") {
			continue
		}
		if m := lockName.FindStringSubmatch(line); m != nil {
			listed[m[1]] = true
		}
	}
	return listed
}

// namedLocks returns every lock named anywhere in the document: the
// three-part names whose field ends in mu, Mu or Mutex (the project's
// naming for locks), so fields they guard can be named in the prose too.
func namedLocks(doc string) []string {
	seen := map[string]bool{}
	for _, m := range lockName.FindAllStringSubmatch(doc, -1) {
		if n := m[1]; strings.HasSuffix(n, "mu") || strings.HasSuffix(n, "Mu") || strings.HasSuffix(n, "Mutex") {
			seen[n] = true
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
