package partition

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/storage"
	"github.com/gregorbroker/gregor/vfs"
)

// The leader epoch cache of a partition: at which offset each leader epoch
// began, kept in the partition's leader-epoch-checkpoint file in Kafka's
// format. OffsetForLeaderEpoch answers from it, and a follower truncates
// with it (KIP-101/279) before it fetches.

const EpochCheckpointFile = "leader-epoch-checkpoint"

// EpochEntry says that leader epoch Epoch began at StartOffset.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// EpochsLocked returns the partition's epoch cache, reading its checkpoint
// or, when there is none, rebuilding it from the batches' leader epochs.
// The caller holds p.Mu.
func (p *Partition) EpochsLocked() ([]EpochEntry, error) {
	if p.Epochs != nil {
		return p.Epochs, nil
	}
	path := filepath.Join(p.Log.Dir(), EpochCheckpointFile)
	data, readErr := vfs.ReadFile(p.Env.FS, path)
	switch err := readErr; {
	case err == nil:
		entries, err := decodeEpochCheckpoint(data)
		if err == nil {
			p.Epochs = entries
			return entries, nil
		}
		p.Env.Log.Warn("rebuilding corrupt leader epoch checkpoint", "topic", p.Topic, "partition", p.Index, "err", err)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	entries, err := rebuildEpochs(p)
	if err != nil {
		return nil, fmt.Errorf("rebuild leader epochs of %s-%d: %w", p.Topic, p.Index, err)
	}
	p.Epochs = entries
	if len(entries) == 0 {
		// Nothing to keep: a new partition's first append records its
		// epoch (noteLeaderEpochLocked), and the file is written then.
		p.epochFileAbsent = errors.Is(readErr, fs.ErrNotExist)
		return entries, nil
	}
	return entries, p.WriteEpochsLocked()
}

// NewLeaderLogFiles is what the new log of a partition this node leads at
// epoch starts with (storage.LogSpec.Files): its leader-epoch-checkpoint,
// saying that epoch begins at offset 0, as Kafka's makeLeader records a
// new leader's epoch at its log end. Made with the log, by CreateLogs'
// workers and unsynced (the log's first flush syncs it), rather than at
// the first append, where creating and fsyncing it took 23% of the
// broker's CPU producing to 1,000 new partitions. A restart that finds
// it missing or torn rebuilds it from the batches (EpochsLocked).
// CreateLogs writes the files only into a log it makes, which is empty
// and starts at 0; a log that exists keeps its own checkpoint.
func NewLeaderLogFiles(epoch int32) []storage.LogFile {
	if epoch < 0 {
		return nil
	}
	return []storage.LogFile{{Name: EpochCheckpointFile, Data: encodeEpochCheckpoint([]EpochEntry{{Epoch: epoch, StartOffset: 0}})}}
}

// StartEpochsAt sets the epoch cache of a partition whose log was just
// made with NewLeaderLogFiles(epoch), to what that file says, so that the
// first append does not read it back (an open and a read per new
// partition, 1.5% of the broker's CPU producing to 1,000 of them).
func (p *Partition) StartEpochsAt(epoch int32) {
	p.Mu.Lock()
	defer p.Mu.Unlock()
	p.Epochs = []EpochEntry{{Epoch: epoch, StartOffset: 0}}
}

// rebuildEpochs reads the partition leader epoch of every batch.
func rebuildEpochs(p *Partition) ([]EpochEntry, error) {
	var out []EpochEntry
	end := p.Log.LogEndOffset()
	for off := p.Log.LogStartOffset(); off < end; {
		rr, err := p.Log.Read(off, 1<<20, end, true)
		if err != nil {
			return nil, err
		}
		if len(rr.Data) == 0 {
			break
		}
		for data := rr.Data; len(data) > 0; {
			_, rest, h, err := protocol.NextBatch(data)
			if err != nil {
				return nil, err
			}
			data = rest
			off = h.LastOffset() + 1
			if n := len(out); h.PartitionLeaderEpoch >= 0 && (n == 0 || h.PartitionLeaderEpoch > out[n-1].Epoch) {
				out = append(out, EpochEntry{h.PartitionLeaderEpoch, h.BaseOffset})
			}
		}
	}
	return out, nil
}

// noteLeaderEpochLocked records that epoch begins at the log end, when it
// is newer than the last one recorded: called before the first append of
// a new leader epoch. The caller holds p.Mu.
func (p *Partition) noteLeaderEpochLocked(epoch int32) error {
	entries, err := p.EpochsLocked()
	if err != nil {
		return err
	}
	if n := len(entries); n > 0 && entries[n-1].Epoch >= epoch {
		return nil
	}
	p.Epochs = append(entries, EpochEntry{epoch, p.Log.LogEndOffset()})
	if p.epochFileAbsent && len(entries) == 0 {
		// The partition's first epoch, in a log without a checkpoint
		// (a new partition's checkpoint comes with its log, from
		// NewLeaderLogFiles, when it is made as the leader; not when
		// made as a follower that then leads an empty log, or when the
		// file was lost): its entry is also in the log, as the partition
		// leader epoch of the batch about to be appended, and with no
		// file a restart rebuilds the cache from the batches
		// (EpochsLocked). So the write, a file created and fsynced
		// with its directory, need not hold up the append: at 1,000
		// new partitions in a produce it took 40% of the broker's
		// time. WriteDeferredEpochs writes it within a second.
		p.epochSeq++ // a state not yet captured for the file
		p.epochsUnwritten.Store(true)
		return nil
	}
	return p.WriteEpochsLocked()
}

// WriteEpochsLocked writes the epoch cache to the partition's
// leader-epoch-checkpoint, atomically and durably. The caller holds p.Mu.
func (p *Partition) WriteEpochsLocked() error {
	path, data, seq := p.captureEpochsLocked()
	if err := p.writeEpochFile(vfs.WriteFileAtomic, path, data, seq); err != nil {
		return err
	}
	p.epochFileAbsent = false
	p.epochsUnwritten.Store(false)
	return nil
}

// captureEpochsLocked is the checkpoint file's path and the epoch cache
// encoded for it, numbered as the cache's newest state. The caller holds
// p.Mu.
func (p *Partition) captureEpochsLocked() (path string, data []byte, seq uint64) {
	p.epochSeq++
	return filepath.Join(p.Log.Dir(), EpochCheckpointFile), encodeEpochCheckpoint(p.Epochs), p.epochSeq
}

// writeEpochFile writes data, the epoch cache's state seq, to the
// checkpoint file at path with write (vfs.WriteFileAtomic, or
// vfs.ReplaceFile for a deferred first epoch), unless the file holds a
// newer state already.
func (p *Partition) writeEpochFile(write func(vfs.FS, string, []byte) error, path string, data []byte, seq uint64) error {
	p.epochFileMu.Lock()
	defer p.epochFileMu.Unlock()
	if seq <= p.epochWritten {
		return nil
	}
	if err := write(p.Env.FS, path, data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	p.epochWritten = seq
	return nil
}

// EpochsUnwritten reports whether the epoch cache holds an entry its
// checkpoint file does not yet (see noteLeaderEpochLocked).
func (p *Partition) EpochsUnwritten() bool { return p.epochsUnwritten.Load() }

// WriteDeferredEpochs writes the leader-epoch-checkpoint whose write a
// first append deferred, if it is still unwritten; a log closed meanwhile
// (its partition deleted or moved) needs none. The background writer and
// the clean shutdown call it. The cache is captured under p.Mu, but the
// file is written and fsynced without it, so that the partition's appends
// do not wait for the disk; writeEpochFile keeps a newer checkpoint,
// written meanwhile under p.Mu, from being overwritten.
func (p *Partition) WriteDeferredEpochs() error {
	if !p.epochsUnwritten.Load() {
		return nil
	}
	p.Mu.Lock()
	if !p.epochsUnwritten.Load() || p.Log.Closed() {
		p.Mu.Unlock()
		return nil
	}
	write := vfs.WriteFileAtomic
	if len(p.Epochs) == 1 && p.epochFileAbsent {
		// Still the first epoch only, which a restart without the
		// file rebuilds from the batches (EpochsLocked): whether the
		// rename survives a crash does not matter, so the directory is
		// not synced (an fsync per new partition, 10% of the broker's
		// CPU in a produce to 10,000 new partitions). The file itself
		// is synced before the rename, so it is never found half
		// written. The next epoch's write syncs the directory.
		write = vfs.ReplaceFile
	}
	path, data, seq := p.captureEpochsLocked()
	p.Mu.Unlock()
	if err := p.writeEpochFile(write, path, data, seq); err != nil {
		if p.Log.Closed() {
			return nil // its directory went with the log
		}
		return err
	}
	p.Mu.Lock()
	defer p.Mu.Unlock()
	if p.epochSeq == seq {
		// Nothing changed since the capture: the file is the cache.
		// Otherwise a later state was written under p.Mu, which set
		// these itself, or deferred, and stays unwritten.
		p.epochFileAbsent = false
		p.epochsUnwritten.Store(false)
	}
	return nil
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch: the largest epoch at or
// below the one asked for, and the offset where it ended (the start of the
// next epoch, or the log end for the current one). An epoch older than
// every recorded one answers itself and the start of the first recorded
// epoch, as Kafka's LeaderEpochFileCache.endOffsetFor does: the records
// of that epoch are gone (retention or DeleteRecords), and a follower or
// consumer that holds some must cut them there. The undefined epoch (-1),
// or an empty cache, answers (-1, -1).
//
// Unlike Kafka, an epoch newer than every recorded one answers the last
// recorded epoch and the log end, not (-1, -1): a Gregor leader records
// its epoch at its first append rather than when it takes the leadership,
// so a follower asking for an epoch this leader never wrote in must still
// learn where to cut.
func EndOffsetForEpoch(entries []EpochEntry, epoch int32, logEnd int64) (int32, int64) {
	if epoch == -1 || len(entries) == 0 {
		return -1, -1
	}
	if epoch < entries[0].Epoch {
		return epoch, entries[0].StartOffset
	}
	for i := len(entries) - 1; i >= 0; i-- {
		if entries[i].Epoch > epoch {
			continue
		}
		if i == len(entries)-1 {
			return entries[i].Epoch, logEnd
		}
		return entries[i].Epoch, entries[i+1].StartOffset
	}
	return -1, -1
}

// encodeEpochCheckpoint writes Kafka's checkpoint text: a version line (0),
// a count line, then "epoch startOffset" lines.
func encodeEpochCheckpoint(entries []EpochEntry) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(entries))
	for _, e := range entries {
		fmt.Fprintf(&b, "%d %d\n", e.Epoch, e.StartOffset)
	}
	return b.Bytes()
}

func decodeEpochCheckpoint(data []byte) ([]EpochEntry, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	line := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		return strings.TrimSpace(sc.Text()), true
	}
	if v, ok := line(); !ok || v != "0" {
		return nil, fmt.Errorf("leader epoch checkpoint: version %q", v)
	}
	c, ok := line()
	n, err := strconv.Atoi(c)
	if !ok || err != nil || n < 0 || n > 1<<20 {
		return nil, fmt.Errorf("leader epoch checkpoint: count %q", c)
	}
	out := make([]EpochEntry, 0, n)
	for i := 0; i < n; i++ {
		l, ok := line()
		f := strings.Fields(l)
		if !ok || len(f) != 2 {
			return nil, fmt.Errorf("leader epoch checkpoint: entry %d %q", i, l)
		}
		e, err1 := strconv.ParseInt(f[0], 10, 32)
		o, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || e < 0 || o < 0 || (i > 0 && (int32(e) <= out[i-1].Epoch || o < out[i-1].StartOffset)) {
			return nil, fmt.Errorf("leader epoch checkpoint: entry %d %q", i, l)
		}
		out = append(out, EpochEntry{int32(e), o})
	}
	if l, ok := line(); ok && l != "" {
		return nil, fmt.Errorf("leader epoch checkpoint: %d entries declared, more found", n)
	}
	return out, nil
}
