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
// storage → protocol for batch headers only (see DESIGN.md). Within broker,
// the root package (the server and its handlers) imports broker/internal/*
// (its machinery), never the other way round.
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
			if p == module+"broker" && strings.HasPrefix(filepath.ToSlash(path), "broker/internal/") {
				// The server's machinery is below it; the server uses
				// it, never the other way round.
				t.Errorf("%s imports %s: nothing under broker/internal imports the broker package", path, p)
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
