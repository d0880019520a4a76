package broker

import (
	"time"

	"github.com/gregorbroker/gregor/broker/internal/partition"
)

// A full disk (ENOSPC, EDQUOT) fails the write that met it with
// KAFKA_STORAGE_ERROR, as Kafka answers a produce whose append threw an
// IOException, but unlike Kafka it does not take the log dir offline:
// storage cuts off the partial write and keeps the log usable, so produce
// works again as soon as space is freed, with no restart
// (docs/faults.md). Followers retry their fetches with
// replica.fetch.backoff.ms meanwhile.

// noSpaceLogEvery bounds the log lines a partition writes while its disk
// stays full: one per interval, with the count of failures since.
const noSpaceLogEvery = 10 * time.Second

// noteNoSpace logs (at most once per noSpaceLogEvery per partition) that
// a write to p failed for want of space. It takes no lock.
func (s *Server) noteNoSpace(p *partition.Partition, err error) {
	n := p.NoSpaceErrors.Add(1)
	now := time.Now().UnixMilli()
	last := p.NoSpaceLoggedMs.Load()
	if now-last < noSpaceLogEvery.Milliseconds() || !p.NoSpaceLoggedMs.CompareAndSwap(last, now) {
		return
	}
	s.log.Warn("out of disk space or file descriptors: writes to the partition fail with KAFKA_STORAGE_ERROR until there is room again",
		"topic", p.Topic, "partition", p.Index, "dir", p.Log.Dir(), "failures", n, "err", err)
}
