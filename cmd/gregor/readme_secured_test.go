package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// readmeBlocks returns the fenced blocks of README.md's section heading,
// in order, each as [language, text].
func readmeBlocks(t *testing.T, heading string) [][2]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README.md has no %q", heading)
	}
	if i := strings.Index(section, "\n#"); i >= 0 {
		section = section[:i]
	}
	var blocks [][2]string
	for {
		_, rest, ok := strings.Cut(section, "```")
		if !ok {
			return blocks
		}
		lang, rest, _ := strings.Cut(rest, "\n")
		body, after, ok := strings.Cut(rest, "```")
		if !ok {
			t.Fatalf("README.md: unterminated block in %q", heading)
		}
		blocks = append(blocks, [2]string{lang, body})
		section = after
	}
}

// TestReadmeSecuredNode runs README.md's "A secured node" as written:
// `gregor cert`, the server.properties given, `gregor serve`, the SCRAM
// user and the ACL made by the admin, and alice producing and consuming
// with the client config given, every command a gregor process in a
// directory of its own (the README's paths are relative). Only the
// ports are changed, to free ones.
func TestReadmeSecuredNode(t *testing.T) {
	blocks := readmeBlocks(t, "### A secured node")
	if len(blocks) != 4 || blocks[0][0] != "sh" || blocks[1][0] != "properties" || blocks[2][0] != "sh" || blocks[3][0] != "properties" {
		t.Fatalf("README's secured node is not sh, properties, sh, properties: %q", blocks)
	}
	dir := t.TempDir()
	t.Chdir(dir)
	client, ctrl := freePort(t), freePort(t)
	ports := strings.NewReplacer("localhost:9094", fmt.Sprintf("127.0.0.1:%d", client), "localhost:9093", fmt.Sprintf("127.0.0.1:%d", ctrl))
	if err := os.WriteFile("server.properties", []byte(ports.Replace(blocks[1][1])), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("alice.properties", []byte(blocks[3][1]), 0o600); err != nil {
		t.Fatal(err)
	}

	// The first block: gregor cert.
	for _, line := range strings.Split(blocks[0][1], "\n") {
		line, _, _ = strings.Cut(line, "#")
		if f := strings.Fields(line); len(f) > 0 {
			if f[0] != "gregor" {
				t.Fatalf("README: %q is not a gregor command", line)
			}
			mustCLI(t, "", "", f[1:]...)
		}
	}

	// The third: serve, then the commands, with $admin expanded.
	vars := map[string]string{}
	addr := ""
	var consumed string
	for _, line := range strings.Split(blocks[2][1], "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "":
		case strings.HasPrefix(line, "export GREGOR_BROKERS="):
			addr = ports.Replace(strings.TrimPrefix(line, "export GREGOR_BROKERS="))
		case strings.HasPrefix(line, "admin="):
			vars["$admin"] = strings.Trim(strings.TrimPrefix(line, "admin="), `"`)
		case strings.HasPrefix(line, "gregor serve "):
			f := strings.Fields(strings.TrimSuffix(line, "&"))
			p := startServe(t, f[2:]...)
			if !strings.Contains(p.addr, fmt.Sprint(client)) {
				t.Fatalf("gregor serve listens on %s", p.addr)
			}
		default:
			stdin := ""
			if in, cmd, ok := strings.Cut(line, " | "); ok {
				if !strings.HasPrefix(in, "echo ") {
					t.Fatalf("README: %q", line)
				}
				stdin, line = strings.TrimPrefix(in, "echo ")+"\n", cmd
			}
			var args []string
			for _, f := range strings.Fields(line) {
				if v, ok := vars[f]; ok {
					args = append(args, strings.Fields(v)...)
				} else {
					args = append(args, f)
				}
			}
			if args[0] != "gregor" {
				t.Fatalf("README: %q is not a gregor command", line)
			}
			args = append(args[1:], "--timeout", "30s")
			out := mustCLI(t, addr, stdin, args...)
			if args[0] == "consume" {
				consumed = out
			}
		}
	}
	if consumed != "hello\n" {
		t.Fatalf("alice consumed %q, want hello", consumed)
	}

	// alice is who the ACL says, not anyone: without it she is refused.
	bob := strings.ReplaceAll(blocks[3][1], "alice", "bob")
	if err := os.WriteFile("bob.properties", []byte(bob), 0o600); err != nil {
		t.Fatal(err)
	}
	admin := strings.Fields(vars["$admin"])
	mustCLI(t, addr, "", append([]string{"user", "create", "bob", "--mechanism", "SCRAM-SHA-512", "--password", "bob-secret"}, admin...)...)
	// (The credential is usable once the broker has applied its record.)
	waitFor(t, 10*time.Second, "bob refused by the ACLs", func() error {
		if r := runCLI(t, addr, "x\n", "produce", "demo", "--command-config", "bob.properties", "--timeout", "10s"); r.code == 0 ||
			!strings.Contains(r.err+r.out, "TOPIC_AUTHORIZATION_FAILED") {
			return fmt.Errorf("bob without an ACL: exit %d\n%s%s", r.code, r.out, r.err)
		}
		return nil
	})
}
