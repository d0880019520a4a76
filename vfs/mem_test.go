package vfs

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func writeFile(t *testing.T, fsys FS, name, data string, sync bool) {
	t.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func readString(t *testing.T, fsys FS, name string) (string, bool) {
	t.Helper()
	b, err := ReadFile(fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

func TestMemCrash(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(t *testing.T, m *MemFS)
		path   string
		want   string
		exists bool
	}{
		{
			name: "unsynced file and dir entry vanish",
			setup: func(t *testing.T, m *MemFS) {
				writeFile(t, m, "/d/a", "hello", false)
			},
			path: "/d/a",
		},
		{
			name: "synced file without SyncDir vanishes",
			setup: func(t *testing.T, m *MemFS) {
				writeFile(t, m, "/d/a", "hello", true)
			},
			path: "/d/a",
		},
		{
			name: "synced file and dir survive",
			setup: func(t *testing.T, m *MemFS) {
				writeFile(t, m, "/d/a", "hello", true)
				mustNil(t, m.SyncDir("/d"))
			},
			path: "/d/a", want: "hello", exists: true,
		},
		{
			name: "data after sync is lost",
			setup: func(t *testing.T, m *MemFS) {
				writeFile(t, m, "/d/a", "hello", true)
				mustNil(t, m.SyncDir("/d"))
				f, err := m.OpenFile("/d/a", os.O_WRONLY|os.O_APPEND, 0)
				mustNil(t, err)
				_, err = f.Write([]byte(" world"))
				mustNil(t, err)
			},
			path: "/d/a", want: "hello", exists: true,
		},
		{
			name: "overwrite in the middle reverts",
			setup: func(t *testing.T, m *MemFS) {
				writeFile(t, m, "/d/a", "hello world", true)
				mustNil(t, m.SyncDir("/d"))
				f, err := m.OpenFile("/d/a", os.O_RDWR, 0)
				mustNil(t, err)
				_, err = f.WriteAt([]byte("XX"), 2)
				mustNil(t, err)
				_, err = f.WriteAt([]byte("!"), 11)
				mustNil(t, err)
			},
			path: "/d/a", want: "hello world", exists: true,
		},
		{
			name: "truncate after sync reverts",
			setup: func(t *testing.T, m *MemFS) {
				writeFile(t, m, "/d/a", "hello world", true)
				mustNil(t, m.SyncDir("/d"))
				f, err := m.OpenFile("/d/a", os.O_RDWR, 0)
				mustNil(t, err)
				mustNil(t, f.Truncate(3))
			},
			path: "/d/a", want: "hello world", exists: true,
		},
		{
			name: "synced truncate and rewrite persists",
			setup: func(t *testing.T, m *MemFS) {
				writeFile(t, m, "/d/a", "hello world", true)
				mustNil(t, m.SyncDir("/d"))
				f, err := m.OpenFile("/d/a", os.O_RDWR, 0)
				mustNil(t, err)
				mustNil(t, f.Truncate(3))
				_, err = f.WriteAt([]byte("p!"), 3)
				mustNil(t, err)
				mustNil(t, f.Sync())
			},
			path: "/d/a", want: "help!", exists: true,
		},
		{
			name: "unsynced remove reverts",
			setup: func(t *testing.T, m *MemFS) {
				writeFile(t, m, "/d/a", "hello", true)
				mustNil(t, m.SyncDir("/d"))
				mustNil(t, m.Remove("/d/a"))
			},
			path: "/d/a", want: "hello", exists: true,
		},
		{
			name: "synced remove persists",
			setup: func(t *testing.T, m *MemFS) {
				writeFile(t, m, "/d/a", "hello", true)
				mustNil(t, m.SyncDir("/d"))
				mustNil(t, m.Remove("/d/a"))
				mustNil(t, m.SyncDir("/d"))
			},
			path: "/d/a",
		},
		{
			name: "atomic write survives",
			setup: func(t *testing.T, m *MemFS) {
				mustNil(t, m.MkdirAll("/d", 0o755))
				mustNil(t, m.SyncDir("/"))
				mustNil(t, WriteFileAtomic(m, "/d/a", []byte("v1")))
				f, err := m.Create("/d/a.tmp")
				mustNil(t, err)
				_, err = f.Write([]byte("v2 partial"))
				mustNil(t, err)
			},
			path: "/d/a", want: "v1", exists: true,
		},
		{
			name: "unsynced rename over reverts to old file",
			setup: func(t *testing.T, m *MemFS) {
				writeFile(t, m, "/d/a", "old", true)
				writeFile(t, m, "/d/b", "new", true)
				mustNil(t, m.SyncDir("/d"))
				mustNil(t, m.Rename("/d/b", "/d/a"))
			},
			path: "/d/a", want: "old", exists: true,
		},
		{
			name: "removed directory comes back",
			setup: func(t *testing.T, m *MemFS) {
				mustNil(t, m.MkdirAll("/d/sub", 0o755))
				writeFile(t, m, "/d/sub/a", "x", true)
				mustNil(t, m.SyncDir("/d/sub"))
				mustNil(t, m.SyncDir("/d"))
				mustNil(t, m.RemoveAll("/d/sub"))
			},
			path: "/d/sub/a", want: "x", exists: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMem()
			mustNil(t, m.MkdirAll("/d", 0o755))
			mustNil(t, m.SyncDir("/"))
			tt.setup(t, m)
			m.Crash()
			got, ok := readString(t, m, tt.path)
			if ok != tt.exists || got != tt.want {
				t.Fatalf("after crash %s = %q (exists %v), want %q (exists %v)", tt.path, got, ok, tt.want, tt.exists)
			}
		})
	}
}

func mustNil(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestMemHandlesDieInCrash(t *testing.T) {
	m := NewMem()
	f, err := m.Create("/a")
	mustNil(t, err)
	m.Crash()
	if _, err := f.Write([]byte("x")); !errors.Is(err, ErrCrashed) {
		t.Fatalf("write after crash: %v, want ErrCrashed", err)
	}
	if _, ok := readString(t, m, "/a"); ok {
		t.Fatal("unsynced file exists after crash")
	}
}

func TestMemFileSemantics(t *testing.T) {
	m := NewMem()
	f, err := m.Create("dir/f") // parent missing
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("create without parent: %v", err)
	}
	mustNil(t, m.MkdirAll("dir", 0o755))
	f, err = m.Create("dir/f")
	mustNil(t, err)
	if _, err := f.WriteAt([]byte("abc"), 5); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	n, err := f.ReadAt(buf, 0)
	if n != 8 || err != io.EOF || !bytes.Equal(buf[:n], []byte("\x00\x00\x00\x00\x00abc")) {
		t.Fatalf("ReadAt = %d %v %q", n, err, buf[:n])
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	all, err := io.ReadAll(f)
	if err != nil || len(all) != 8 {
		t.Fatalf("ReadAll = %q, %v", all, err)
	}
	st, err := f.Stat()
	mustNil(t, err)
	if st.Size() != 8 || st.Name() != "f" || st.IsDir() {
		t.Fatalf("stat = %v %v %v", st.Size(), st.Name(), st.IsDir())
	}
	mustNil(t, f.Close())
	if err := f.Close(); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("second close: %v", err)
	}

	if _, err := m.OpenFile("dir/f", os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("O_EXCL on existing: %v", err)
	}
	r, err := m.Open("dir/f")
	mustNil(t, err)
	if _, err := r.Write([]byte("x")); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("write to read-only: %v", err)
	}
	if _, err := writeAtHuge(m); err == nil {
		t.Fatal("huge write succeeded")
	}

	if err := m.Remove("dir"); err == nil {
		t.Fatal("removed non-empty dir")
	}
	mustNil(t, m.Rename("dir", "dir2"))
	ents, err := m.ReadDir("dir2")
	mustNil(t, err)
	if len(ents) != 1 || ents[0].Name() != "f" {
		t.Fatalf("ReadDir = %v", ents)
	}
	if _, err := m.Stat("dir"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat renamed-away dir: %v", err)
	}
	if err := m.Rename("dir2", "dir2/sub"); err == nil {
		t.Fatal("renamed a dir into itself")
	}
	mustNil(t, m.RemoveAll("dir2"))
	mustNil(t, m.RemoveAll("dir2"))
}

// writeAtHuge tries a write at an offset no test should allocate for.
func writeAtHuge(m *MemFS) (int, error) {
	f, err := m.Create("/huge")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return f.WriteAt([]byte("x"), 1<<40)
}

// TestMemMatchesOS runs the same operations against MemFS and the OS and
// compares what is read back.
func TestMemMatchesOS(t *testing.T) {
	osDir := t.TempDir()
	for _, c := range []struct {
		fsys FS
		root string
	}{{NewMem(), "/x"}, {Default, osDir}} {
		fsys, root := c.fsys, c.root
		mustNil(t, fsys.MkdirAll(filepath.Join(root, "a/b"), 0o755))
		name := filepath.Join(root, "a/b/f")
		f, err := fsys.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		mustNil(t, err)
		_, err = f.Write([]byte("one"))
		mustNil(t, err)
		_, err = f.Write([]byte("two"))
		mustNil(t, err)
		if _, err := f.WriteAt([]byte("z"), 0); err == nil {
			t.Fatalf("%T: WriteAt on O_APPEND succeeded", fsys)
		}
		mustNil(t, f.Close())
		got, ok := readString(t, fsys, name)
		if !ok || got != "onetwo" {
			t.Fatalf("%T: got %q", fsys, got)
		}
		mustNil(t, WriteFileAtomic(fsys, name, []byte("three")))
		got, _ = readString(t, fsys, name)
		if got != "three" {
			t.Fatalf("%T: after atomic write got %q", fsys, got)
		}
		ents, err := fsys.ReadDir(filepath.Join(root, "a/b"))
		mustNil(t, err)
		if len(ents) != 1 {
			t.Fatalf("%T: %d entries, want 1 (tmp file left behind?)", fsys, len(ents))
		}
		mtime := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
		mustNil(t, fsys.Chtimes(name, mtime, mtime))
		st, err := fsys.Stat(name)
		mustNil(t, err)
		if !st.ModTime().Equal(mtime) {
			t.Fatalf("%T: modification time %v after Chtimes to %v", fsys, st.ModTime(), mtime)
		}
		if err := fsys.Chtimes(filepath.Join(root, "missing"), mtime, mtime); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%T: Chtimes of a missing file: %v", fsys, err)
		}
	}
}

func TestMemConcurrent(t *testing.T) {
	m := NewMem()
	mustNil(t, m.MkdirAll("/d", 0o755))
	mustNil(t, m.SyncDir("/"))
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := filepath.Join("/d", string(rune('a'+i)))
			for j := range 50 {
				f, err := m.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o644)
				if err != nil {
					t.Error(err)
					return
				}
				f.WriteAt([]byte{byte(j)}, int64(j))
				f.Sync()
				f.Close()
				m.SyncDir("/d")
				m.ReadDir("/d")
			}
		}()
	}
	wg.Wait()
	ents, err := m.ReadDir("/d")
	mustNil(t, err)
	if len(ents) != 4 {
		t.Fatalf("%d entries", len(ents))
	}
	m.Crash()
	b, err := ReadFile(m, "/d/a")
	mustNil(t, err)
	if len(b) != 50 || b[49] != 49 {
		t.Fatalf("synced data lost: len %d", len(b))
	}
}

// TestReplaceFileCrash: ReplaceFile leaves a file that a crash finds
// whole, old or new, never half written: without a later SyncDir the
// rename is lost (a new file is absent again, a replaced one holds its old
// contents), and after one the new contents survive.
func TestReplaceFileCrash(t *testing.T) {
	m := NewMem()
	if err := m.MkdirAll("d", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncDir("."); err != nil {
		t.Fatal(err)
	}
	read := func(name string) (string, error) {
		b, err := ReadFile(m, name)
		return string(b), err
	}
	if err := ReplaceFile(m, "d/new", []byte("first")); err != nil {
		t.Fatal(err)
	}
	if got, err := read("d/new"); err != nil || got != "first" {
		t.Fatalf("before the crash: %q %v", got, err)
	}
	m.Crash()
	if got, err := read("d/new"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a new file whose directory was not synced survived the crash: %q %v", got, err)
	}

	if err := WriteFileAtomic(m, "d/old", []byte("old contents")); err != nil {
		t.Fatal(err)
	}
	if err := ReplaceFile(m, "d/old", []byte("new")); err != nil {
		t.Fatal(err)
	}
	m.Crash()
	if got, err := read("d/old"); err != nil || got != "old contents" {
		t.Fatalf("replaced without the directory's sync, after the crash: %q %v, want the old contents", got, err)
	}

	if err := ReplaceFile(m, "d/old", []byte("new")); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncDir("d"); err != nil {
		t.Fatal(err)
	}
	m.Crash()
	if got, err := read("d/old"); err != nil || got != "new" {
		t.Fatalf("replaced, directory synced later, after the crash: %q %v", got, err)
	}
}
