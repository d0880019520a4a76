//go:build linux

// Command fsynclat measures the latency distribution of a durable write on
// a directory's disk, the floor under gregor's durable mode
// (flush.messages=1): each op writes -size bytes at the end of each of
// -files files and syncs them side by side, as a flush of a Produce for
// that many partitions does; -clean more files, never written, are synced
// with them, as the unchanged index files of each segment once were. It
// prints p50, p90, p99, p99.9 and the maximum in ms.
//
//	go run ./cmd/fsynclat -dir /var/lib/gregor -n 2000
//	go run ./cmd/fsynclat -files 16 -clean 32 -n 300
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"
)

func main() {
	dir := flag.String("dir", ".", "`directory` on the disk to measure")
	n := flag.Int("n", 2000, "ops")
	size := flag.Int("size", 1024, "`bytes` written to each file per op")
	files := flag.Int("files", 1, "files written and synced side by side per op")
	clean := flag.Int("clean", 0, "files synced per op without being written")
	data := flag.Bool("fdatasync", true, "fdatasync; false for fsync")
	flag.Parse()
	if err := run(*dir, *n, *size, *files, *clean, *data); err != nil {
		fmt.Fprintln(os.Stderr, "fsynclat:", err)
		os.Exit(1)
	}
}

func run(dir string, n, size, files, clean int, data bool) error {
	if n < 1 || files < 1 || size < 1 || clean < 0 {
		return fmt.Errorf("-n, -files and -size must be positive, -clean not negative")
	}
	tmp, err := os.MkdirTemp(dir, "fsynclat-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var fs []*os.File
	for i := range files + clean {
		f, err := os.Create(filepath.Join(tmp, fmt.Sprint(i)))
		if err != nil {
			return err
		}
		defer f.Close()
		fs = append(fs, f)
	}
	sync1 := func(f *os.File) error {
		if data {
			return syscall.Fdatasync(int(f.Fd()))
		}
		return f.Sync()
	}
	buf := make([]byte, size)
	took := make([]time.Duration, 0, n)
	errs := make([]error, len(fs))
	for op := range n {
		start := time.Now()
		var wg sync.WaitGroup
		for i, f := range fs {
			wg.Go(func() {
				if i < files {
					if _, err := f.WriteAt(buf, int64(op*size)); err != nil {
						errs[i] = err
						return
					}
				}
				if err := sync1(f); err != nil {
					errs[i] = err
				}
			})
		}
		wg.Wait()
		took = append(took, time.Since(start))
		for _, err := range errs {
			if err != nil {
				return fmt.Errorf("op %d: %w", op, err)
			}
		}
	}
	slices.Sort(took)
	q := func(p float64) float64 { return float64(took[int(p*float64(len(took)-1))]) / 1e6 }
	kind := "fdatasync"
	if !data {
		kind = "fsync"
	}
	fmt.Printf("%d ops of %d B to %d file(s) + %d clean, %s: p50 %.3f p90 %.3f p99 %.3f p99.9 %.3f max %.3f ms\n",
		n, size, files, clean, kind, q(.5), q(.9), q(.99), q(.999), q(1))
	return nil
}
