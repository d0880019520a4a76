package broker

import (
	"math"
	"time"
)

// flushScheduler is Kafka's log flusher: every
// log.flush.scheduler.interval.ms it flushes each hosted log whose last
// flush is older than its topic's flush.ms, so flush.ms holds for a
// partition that stops receiving records (appends check it only as they
// come). With Kafka's default interval, Long.MAX_VALUE, it never runs, as
// in Kafka.
func (s *Server) flushScheduler() {
	ms := s.cfg.LogFlushSchedulerIntervalMs
	if ms <= 0 || ms >= math.MaxInt64/int64(time.Millisecond) {
		return
	}
	t := time.NewTicker(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			s.flushStaleLogs()
		}
	}
}

// flushStaleLogs flushes the hosted logs past their flush.ms; a disk
// error takes the log's dir offline, as one met by an append does.
func (s *Server) flushStaleLogs() {
	for _, tp := range s.parts.all() {
		for _, p := range tp.parts {
			if p == nil || p.Log == nil {
				continue
			}
			if _, err := p.Log.FlushIfStale(); err != nil {
				s.storageFailed(p, err)
			}
		}
	}
}
