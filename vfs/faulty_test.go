package vfs

import (
	"errors"
	"testing"
	"time"
)

func TestFaulty(t *testing.T) {
	tests := []struct {
		name     string
		failOp   Op
		failErr  error
		wantErr  bool
		wantData string // contents of /f read from the inner FS afterwards
	}{
		{name: "no fault", wantData: "abcdef"},
		{name: "write fails", failOp: OpWrite, failErr: ErrInjected, wantErr: true, wantData: ""},
		{name: "short write", failOp: OpWrite, failErr: &ShortWriteError{Err: ErrInjected}, wantErr: true, wantData: "abc"},
		{name: "sync fails", failOp: OpSync, failErr: ErrInjected, wantErr: true, wantData: "abcdef"},
		{name: "close fails but closes", failOp: OpClose, failErr: ErrInjected, wantErr: true, wantData: "abcdef"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := NewMem()
			var calls []Op
			fsys := NewFaulty(mem, func(op Op, path string) error {
				calls = append(calls, op)
				if op == tt.failOp && path == "/f" {
					return tt.failErr
				}
				return nil
			})
			f, err := fsys.Create("/f")
			mustNil(t, err)
			_, werr := f.Write([]byte("abcdef"))
			serr := f.Sync()
			cerr := f.Close()
			gotErr := errors.Join(werr, serr, cerr)
			if (gotErr != nil) != tt.wantErr {
				t.Fatalf("errors %v, wantErr %v", gotErr, tt.wantErr)
			}
			if tt.wantErr && !errors.Is(gotErr, ErrInjected) {
				t.Fatalf("error %v does not wrap ErrInjected", gotErr)
			}
			got, _ := readString(t, mem, "/f")
			if got != tt.wantData {
				t.Fatalf("data %q, want %q", got, tt.wantData)
			}
			if calls[0] != OpCreate {
				t.Fatalf("first op %v, want create", calls[0])
			}
		})
	}
}

func TestFaultyFSOps(t *testing.T) {
	ops := []struct {
		op  Op
		run func(FS) error
	}{
		{OpMkdirAll, func(f FS) error { return f.MkdirAll("/d", 0o755) }},
		{OpSyncDir, func(f FS) error { return f.SyncDir("/") }},
		{OpRename, func(f FS) error { return f.Rename("/a", "/b") }},
		{OpRemove, func(f FS) error { return f.Remove("/a") }},
		{OpRemoveAll, func(f FS) error { return f.RemoveAll("/a") }},
		{OpStat, func(f FS) error { _, err := f.Stat("/a"); return err }},
		{OpReadDir, func(f FS) error { _, err := f.ReadDir("/"); return err }},
		{OpOpen, func(f FS) error { _, err := f.Open("/a"); return err }},
		{OpChtimes, func(f FS) error { return f.Chtimes("/a", time.Time{}, time.Unix(5, 0)) }},
	}
	for _, o := range ops {
		t.Run(o.op.String(), func(t *testing.T) {
			mem := NewMem()
			writeFile(t, mem, "/a", "x", true)
			fsys := NewFaulty(mem, func(op Op, _ string) error {
				if op == o.op {
					return ErrInjected
				}
				return nil
			})
			if err := o.run(fsys); !errors.Is(err, ErrInjected) {
				t.Fatalf("%v: got %v, want injected fault", o.op, err)
			}
			// The inner filesystem must be untouched.
			if got, ok := readString(t, mem, "/a"); !ok || got != "x" {
				t.Fatalf("inner changed: %q %v", got, ok)
			}
		})
	}
}
