package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// progressEnv sets how often long transfers (perf, produce, consume)
// print a progress line on stderr: a Go duration such as "500ms", or "0"
// for none. Unset, every 5 s, as Kafka's perf tools report by default
// (--reporting-interval 5000). Tests shorten it; docs/operations.md
// documents it.
const progressEnv = "GREGOR_PROGRESS_INTERVAL"

const defaultProgressInterval = 5 * time.Second

// progressInterval reads progressEnv. A value that is not a duration is
// reported on log and the default used: a progress line is not worth
// failing a transfer for.
func progressInterval(log io.Writer) time.Duration {
	v := os.Getenv(progressEnv)
	if v == "" {
		return defaultProgressInterval
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		fmt.Fprintf(log, "gregor: %s=%q is not a duration such as 5s or 0; reporting every %v\n", progressEnv, v, defaultProgressInterval)
		return defaultProgressInterval
	}
	return d
}

// reportEvery calls report with the time since the previous call (or
// since the start) every interval, on its own goroutine, until stop is
// called; stop returns once no report runs. An interval of 0 reports
// nothing.
func reportEvery(interval time.Duration, report func(window time.Duration)) (stop func()) {
	if interval <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				report(now.Sub(last))
				last = now
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		wg.Wait()
	}
}

// transferMeter counts records and bytes moved, from any goroutine, and
// hands out what moved since the last window.
type transferMeter struct {
	records, bytes         atomic.Int64
	seenRecords, seenBytes int64 // as of the last window; the reporter's own
}

func (m *transferMeter) add(records, bytes int64) {
	m.records.Add(records)
	m.bytes.Add(bytes)
}

// window returns the records and bytes moved since the previous call and
// the totals. Only one goroutine (the reporter) calls it.
func (m *transferMeter) window() (records, bytes, totalRecords, totalBytes int64) {
	r, b := m.records.Load(), m.bytes.Load()
	records, bytes = r-m.seenRecords, b-m.seenBytes
	m.seenRecords, m.seenBytes = r, b
	return records, bytes, r, b
}

// rates are records/s and MB/s over d.
func rates(records, bytes int64, d time.Duration) (perSec, mbPerSec float64) {
	s := d.Seconds()
	if s <= 0 {
		return 0, 0
	}
	return float64(records) / s, float64(bytes) / mb / s
}

// interruptedError ends a command stopped by SIGINT or SIGTERM once it
// has printed what it did: gregor then exits with 130, the status a shell
// gives a command that SIGINT ended.
type interruptedError struct{ what string }

func (e *interruptedError) Error() string { return e.what }

// interruptedExit is the exit status of an interrupted command.
const interruptedExit = 130

// isTerminal reports whether f is a terminal (a character device).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
