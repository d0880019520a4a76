// Package gregor holds repository-wide tests; the code lives in the
// packages below it.
package gregor

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/gregorbroker/gregor/"

// allowed lists, for each package, the project packages it may import:
// imports point one way, cmd → broker → {raftmeta, storage, protocol}, and
// storage → protocol for batch headers only (see DESIGN.md).
var allowed = map[string][]string{
	"vfs":      {},
	"protocol": {},
	"config":   {},
	"storage":  {"protocol", "vfs"},
	"raftmeta": {"vfs"},
	"broker":   {"protocol", "storage", "raftmeta", "config", "vfs"},
}

// forbiddenStd are standard packages a package must not import: protocol is
// sans-I/O, so it can be fuzzed and tested with captured frames.
var forbiddenStd = map[string][]string{
	"protocol": {"net", "os"},
	"storage":  {"net"},
	"raftmeta": {"net/http"},
}

func TestImportRules(t *testing.T) {
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		top := strings.Split(filepath.ToSlash(path), "/")[0]
		rules, ok := allowed[top]
		if !ok {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			for _, bad := range forbiddenStd[top] {
				if p == bad {
					t.Errorf("%s imports %s, which %s must not", path, p, top)
				}
			}
			if !strings.HasPrefix(p, module) {
				continue
			}
			dep := strings.Split(strings.TrimPrefix(p, module), "/")[0]
			if dep == top {
				continue
			}
			ok := false
			for _, a := range rules {
				ok = ok || a == dep
			}
			if !ok {
				t.Errorf("%s imports %s: %s may import only %v", path, p, top, rules)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
