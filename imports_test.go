// Package gregor holds repository-wide tests; the code lives in the
// packages below it.
package gregor

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/gregorbroker/gregor/"

// allowed lists, for each package, the project packages it may import:
// imports point one way, cmd → broker → {raftmeta, storage, protocol}, and
// storage → protocol for batch headers only (see docs/architecture.md).
// Within broker, the root package (the server and its handlers) imports
// broker/internal/* (its machinery), never the other way round. A key covers
// its package and those below it unless one of them has a key of its own;
// packages under the same key import each other freely.
//
// raftmeta is layered: raftmeta (a node with its controller) →
// controller (the controller and its rpcs) → raftnode (raft, the log on
// disk, the transport) → image (the metadata image and records) →
// internal/compact (the encoding they share).
var allowed = map[string][]string{
	// internal/cowmap is a leaf: the copy-on-write sharded map the
	// metadata image and the broker's hosted partition table share.
	"internal/cowmap": {},
	// internal/crc32c is a leaf: CRC-32C, the batches' checksum.
	"internal/crc32c": {},
	"vfs":             {},
	"protocol":        {"internal/crc32c"},
	"config":          {},
	"storage":         {"protocol", "vfs"},
	"security":        {"config"},
	// authz decides with what it is handed: no config, no connections.
	"security/authz": {},

	"raftmeta/internal/compact": {},
	"raftmeta/image":            {"raftmeta/internal/compact", "internal/cowmap"},
	"raftmeta/raftnode":         {"raftmeta/image", "raftmeta/internal/compact", "vfs"},
	"raftmeta/controller":       {"raftmeta/raftnode", "raftmeta/image", "raftmeta/internal/compact", "security/authz"},
	"raftmeta":                  {"raftmeta/controller", "raftmeta/raftnode", "vfs"},

	"broker": {"protocol", "storage", "raftmeta", "raftmeta/controller", "raftmeta/raftnode", "raftmeta/image", "config", "security", "security/authz", "vfs", "internal/cowmap"},

	// The web console is a Kafka client of the node (kgo/kadm over its
	// client listener), beside the broker rather than in it: it imports
	// no project package, only cmd/gregor imports it, and it reaches the
	// broker's HTTP listener through broker.Options.HTTPHandler.
	"console": {},
}

// forbiddenStd are standard packages a package must not import: protocol is
// sans-I/O, so it can be fuzzed and tested with captured frames.
var forbiddenStd = map[string][]string{
	"protocol": {"net", "os"},
	"storage":  {"net"},
	"raftmeta": {"net/http"},
}

// forbiddenLayer are packages a raftmeta layer must not import, by path
// prefix: the image is plain data, with no raft, disk or network in it.
var forbiddenLayer = map[string][]string{
	"internal/cowmap":           {"net", "os"},
	"internal/crc32c":           {"net", "os"},
	"raftmeta/image":            {"go.etcd.io/raft", "net", "os"},
	"raftmeta/internal/compact": {"go.etcd.io/raft", "net", "os"},
}

// layerOf returns the key of allowed that governs package path p (a path
// in the module), or "" if none does.
func layerOf(p string) string {
	best := ""
	for k := range allowed {
		if (p == k || strings.HasPrefix(p, k+"/")) && len(k) > len(best) {
			best = k
		}
	}
	return best
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
		pkg := filepath.ToSlash(filepath.Dir(path))
		top := strings.Split(pkg, "/")[0]
		layer := layerOf(pkg)
		if layer == "" {
			return nil
		}
		rules := allowed[layer]
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
			for _, bad := range forbiddenLayer[layer] {
				if p == bad || strings.HasPrefix(p, bad+"/") {
					t.Errorf("%s imports %s, which %s must not", path, p, layer)
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
			dep := strings.TrimPrefix(p, module)
			depLayer := layerOf(dep)
			if depLayer == "" {
				depLayer = strings.Split(dep, "/")[0]
			}
			if depLayer == layer {
				continue
			}
			if !slices.Contains(rules, depLayer) {
				t.Errorf("%s imports %s: %s may import only %v", path, p, layer, rules)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// coordinatorImports lists, for the coordinators inside broker and the
// runtime they share, the project packages each may import from its code
// and, in addition, from its tests. The coordinators and the runtime import
// no broker-root code, the runtime knows no coordinator, and coordinators
// do not import each other, so a further coordinator (share groups) joins
// on the same terms.
var coordinatorImports = map[string]struct{ code, tests []string }{
	"broker/coord":           {tests: []string{"broker/coord/coordtest"}},
	"broker/coord/coordtest": {code: []string{"broker/coord"}},
	"broker/group":           {code: []string{"broker/coord"}, tests: []string{"broker/coord/coordtest"}},
	"broker/txn":             {code: []string{"broker/coord"}, tests: []string{"broker/coord/coordtest", "broker/producerstate"}},
	"broker/share":           {code: []string{"broker/coord"}, tests: []string{"broker/coord/coordtest"}},
}

func TestCoordinatorImports(t *testing.T) {
	fset := token.NewFileSet()
	for dir, rules := range coordinatorImports {
		files, err := filepath.Glob(filepath.Join(filepath.FromSlash(dir), "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", dir, err)
		}
		for _, path := range files {
			f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			allowed := rules.code
			if strings.HasSuffix(path, "_test.go") {
				allowed = append(slices.Clone(rules.code), rules.tests...)
			}
			for _, imp := range f.Imports {
				p := strings.Trim(imp.Path.Value, `"`)
				if !strings.HasPrefix(p, module) {
					continue
				}
				dep := strings.TrimPrefix(p, module)
				if dep != dir && !slices.Contains(allowed, dep) {
					t.Errorf("%s imports %s: %s may import only %v", path, p, dir, allowed)
				}
			}
		}
	}
}
