package raftnode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/gregorbroker/gregor/raftmeta/internal/compact"
	"github.com/gregorbroker/gregor/vfs"
)

// On disk, the metadata log lives in <dir>/__cluster_metadata-0/ (Kafka's
// directory name for it) as:
//
//	<20-digit index>.wal   log segments; the name is the snapshot index the
//	                       segment starts after (0 for the first)
//	<20-digit index>.snap  image snapshots at that raft index
//
// A segment is a sequence of records, each
//
//	length  uint32 big endian, of type+payload
//	crc     uint32 big endian, CRC-32C (Castagnoli) of type+payload
//	type    1 byte: meta, entry or hard state
//	payload meta: node ID and cluster ID; entry and hard state: their
//	        protobuf encodings
//
// Every segment opens with a meta record. An entry whose index is at or
// below the last one replaces it and everything after (raft's log
// truncation); the last hard state wins. A segment is only ever appended to,
// and a new one is written whole (temporary file, fsync, rename) when a
// snapshot compacts the log, after which older segments and snapshots are
// removed. Recovery checks every checksum; a bad or short record at the end
// of the newest segment is a torn write and is truncated away, anywhere else
// it is corruption and an error.
const (
	metadataDirName = "__cluster_metadata-0"
	segmentSuffix   = ".wal"
	snapSuffix      = ".snap"
	tmpSuffix       = ".tmp"

	walHeaderLen = 9
	// maxWALRecord bounds one record so that a corrupt length cannot make
	// recovery allocate without limit.
	maxWALRecord = 64 << 20

	walMeta      byte = 1
	walEntry     byte = 2
	walHardState byte = 3
)

// snapMagic opens a snapshot file; a CRC-32C of everything before it closes
// the file.
var snapMagic = []byte("GRGSNAP1")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// storageMeta identifies whose log a directory holds.
type storageMeta struct {
	nodeID    uint64
	clusterID string
}

// diskStorage is raft's Storage for a node: a raft.MemoryStorage that holds
// the log in memory for raft to read, in front of the files that make it
// durable. Only the node's Ready loop calls it.
type diskStorage struct {
	fs  vfs.FS
	dir string
	log *slog.Logger
	mem *raft.MemoryStorage

	meta    storageMeta
	hasMeta bool
	hs      *pb.HardState
	snap    *pb.Snapshot // newest snapshot, nil if none

	seg     vfs.File // newest segment, open for appending
	segName string
	buf     []byte

	// err is sticky: after a failed write or fsync the state of the files
	// is unknown, so nothing more is written.
	err error
}

var _ raft.Storage = (*diskStorage)(nil)

func segmentName(index uint64) string { return fmt.Sprintf("%020d%s", index, segmentSuffix) }
func snapName(index uint64) string    { return fmt.Sprintf("%020d%s", index, snapSuffix) }

// parseIndexName returns the index in a name of the form <20 digits><suffix>.
func parseIndexName(name, suffix string) (uint64, bool) {
	base, ok := strings.CutSuffix(name, suffix)
	if !ok || len(base) != 20 {
		return 0, false
	}
	v, err := strconv.ParseUint(base, 10, 64)
	return v, err == nil
}

// openStorage recovers the log in dir, creating dir if needed. A directory
// without segments yields an empty storage with no meta; bootstrap must be
// called before anything is appended.
func openStorage(fsys vfs.FS, dir string, logger *slog.Logger) (*diskStorage, error) {
	s := &diskStorage{fs: fsys, dir: dir, log: logger, mem: raft.NewMemoryStorage()}
	if err := mkdirAllDurable(fsys, dir); err != nil {
		return nil, fmt.Errorf("open metadata log %s: %w", dir, err)
	}
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("open metadata log %s: %w", dir, err)
	}
	var segs, snaps []uint64
	for _, de := range ents {
		name := de.Name()
		if strings.HasSuffix(name, tmpSuffix) {
			// A write that never reached its rename.
			if err := fsys.Remove(filepath.Join(dir, name)); err != nil {
				return nil, fmt.Errorf("open metadata log: remove %s: %w", name, err)
			}
			continue
		}
		if i, ok := parseIndexName(name, segmentSuffix); ok {
			segs = append(segs, i)
		} else if i, ok := parseIndexName(name, snapSuffix); ok {
			snaps = append(snaps, i)
		}
	}
	slices.Sort(segs)
	slices.Sort(snaps)
	if len(snaps) > 0 {
		if len(segs) == 0 {
			return nil, fmt.Errorf("open metadata log %s: snapshot without log segments", dir)
		}
		idx := snaps[len(snaps)-1]
		snap, err := readSnapshotFile(fsys, filepath.Join(dir, snapName(idx)))
		if err != nil {
			return nil, fmt.Errorf("open metadata log: %w", err)
		}
		if snap.GetMetadata().GetIndex() != idx {
			return nil, fmt.Errorf("open metadata log: snapshot %s holds index %d", snapName(idx), snap.GetMetadata().GetIndex())
		}
		if err := s.mem.ApplySnapshot(snap); err != nil {
			return nil, fmt.Errorf("open metadata log: apply snapshot %d: %w", idx, err)
		}
		s.snap = snap
	}
	for i, idx := range segs {
		last := i == len(segs)-1
		if err := s.replaySegment(segmentName(idx), last); err != nil {
			return nil, fmt.Errorf("open metadata log: %w", err)
		}
	}
	if s.hs != nil {
		lastIndex, _ := s.mem.LastIndex()
		snapIndex := s.snap.GetMetadata().GetIndex()
		// A snapshot is only taken of committed entries.
		if s.hs.GetCommit() < snapIndex {
			s.hs.Commit = new(snapIndex)
		}
		if s.hs.GetCommit() > lastIndex {
			return nil, fmt.Errorf("open metadata log: commit index %d is past the last entry %d", s.hs.GetCommit(), lastIndex)
		}
		if err := s.mem.SetHardState(s.hs); err != nil {
			return nil, fmt.Errorf("open metadata log: %w", err)
		}
	}
	if len(segs) > 0 {
		name := segmentName(segs[len(segs)-1])
		if err := s.openSegment(name); err != nil {
			return nil, fmt.Errorf("open metadata log: %w", err)
		}
	}
	return s, nil
}

// mkdirAllDurable creates dir and any missing parents, and syncs the parent
// of each directory it creates so that a crash cannot undo the creation.
func mkdirAllDurable(fsys vfs.FS, dir string) error {
	dir = filepath.Clean(dir)
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := fsys.Stat(d); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := fsys.SyncDir(filepath.Dir(missing[i])); err != nil {
			return err
		}
	}
	return nil
}

// replaySegment reads one segment into memory. In the newest segment a bad
// record is a torn tail and the file is cut before it.
func (s *diskStorage) replaySegment(name string, newest bool) error {
	path := filepath.Join(s.dir, name)
	data, err := vfs.ReadFile(s.fs, path)
	if err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	off := 0
	first := true
	for off < len(data) {
		typ, payload, n, err := readWALRecord(data[off:])
		if err == nil {
			err = s.replayRecord(typ, payload, first)
		}
		if err != nil {
			// Segments are written whole with their meta record first, so
			// only a tail after it can be torn.
			if !newest || first {
				return fmt.Errorf("%s at byte %d: %w", name, off, err)
			}
			s.log.Warn("truncating torn tail of metadata log", "segment", name, "offset", off, "dropped_bytes", len(data)-off, "err", err)
			if err := s.truncateFile(path, int64(off)); err != nil {
				return err
			}
			break
		}
		first = false
		off += n
	}
	if first {
		return fmt.Errorf("%s: empty segment", name)
	}
	return nil
}

func (s *diskStorage) truncateFile(path string, size int64) error {
	f, err := s.fs.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("truncate %s: %w", path, err)
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return fmt.Errorf("truncate %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("truncate %s: sync: %w", path, err)
	}
	return f.Close()
}

// readWALRecord parses the record at the start of b and returns its type,
// payload and encoded length.
func readWALRecord(b []byte) (byte, []byte, int, error) {
	if len(b) < walHeaderLen {
		return 0, nil, 0, fmt.Errorf("short record header: %d bytes", len(b))
	}
	n := binary.BigEndian.Uint32(b)
	sum := binary.BigEndian.Uint32(b[4:])
	// n counts the type byte, so a zeroed region (length 0, CRC 0) is
	// rejected rather than read as an empty record.
	if n == 0 || n > maxWALRecord {
		return 0, nil, 0, fmt.Errorf("bad record length %d", n)
	}
	if uint64(len(b)-8) < uint64(n) {
		return 0, nil, 0, fmt.Errorf("record of %d bytes runs past the end", n)
	}
	body := b[8 : 8+n]
	if crc32.Checksum(body, castagnoli) != sum {
		return 0, nil, 0, fmt.Errorf("checksum mismatch")
	}
	return body[0], body[1:], int(8 + n), nil
}

func appendWALRecord(b []byte, typ byte, payload []byte) []byte {
	start := len(b)
	b = binary.BigEndian.AppendUint32(b, uint32(1+len(payload)))
	b = binary.BigEndian.AppendUint32(b, 0)
	b = append(b, typ)
	b = append(b, payload...)
	binary.BigEndian.PutUint32(b[start+4:], crc32.Checksum(b[start+8:], castagnoli))
	return b
}

func (s *diskStorage) replayRecord(typ byte, payload []byte, first bool) error {
	if first != (typ == walMeta) {
		return fmt.Errorf("meta record must open a segment (got type %d first=%v)", typ, first)
	}
	switch typ {
	case walMeta:
		m, err := decodeStorageMeta(payload)
		if err != nil {
			return err
		}
		if s.hasMeta && m != s.meta {
			return fmt.Errorf("segment belongs to node %d of cluster %q, not node %d of %q", m.nodeID, m.clusterID, s.meta.nodeID, s.meta.clusterID)
		}
		s.meta, s.hasMeta = m, true
		return nil
	case walEntry:
		e := new(pb.Entry)
		if err := proto.Unmarshal(payload, e); err != nil {
			return fmt.Errorf("decode entry: %w", err)
		}
		return s.replayEntry(e)
	case walHardState:
		hs := new(pb.HardState)
		if err := proto.Unmarshal(payload, hs); err != nil {
			return fmt.Errorf("decode hard state: %w", err)
		}
		s.hs = hs
		return nil
	default:
		return fmt.Errorf("unknown record type %d", typ)
	}
}

// replayEntry adds a recovered entry, replacing any entries at or after its
// index as raft did when it wrote it.
func (s *diskStorage) replayEntry(e *pb.Entry) error {
	first, _ := s.mem.FirstIndex()
	last, _ := s.mem.LastIndex()
	idx := e.GetIndex()
	switch {
	case idx < first:
		return nil // covered by the snapshot
	case idx > last+1:
		return fmt.Errorf("entry %d leaves a gap after %d", idx, last)
	case idx > first:
		prevTerm, err := s.mem.Term(idx - 1)
		if err != nil {
			return fmt.Errorf("entry %d: %w", idx, err)
		}
		if e.GetTerm() < prevTerm {
			return fmt.Errorf("entry %d has term %d below its predecessor's %d", idx, e.GetTerm(), prevTerm)
		}
	}
	return s.mem.Append([]*pb.Entry{e})
}

func encodeStorageMeta(m storageMeta) []byte {
	e := compact.Encoder{}
	e.Uvarint(m.nodeID)
	e.Str(m.clusterID)
	return e.Buf
}

func decodeStorageMeta(b []byte) (storageMeta, error) {
	d := compact.Decoder{Buf: b}
	m := storageMeta{nodeID: d.Uvarint(), clusterID: d.Str()}
	if d.Err == nil && len(d.Buf) != 0 {
		d.Fail("%d trailing bytes", len(d.Buf))
	}
	if d.Err != nil {
		return m, fmt.Errorf("decode meta record: %w", d.Err)
	}
	return m, nil
}

func (s *diskStorage) openSegment(name string) error {
	f, err := s.fs.OpenFile(filepath.Join(s.dir, name), os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open segment %s: %w", name, err)
	}
	// Appends go after what recovery kept.
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		f.Close()
		return fmt.Errorf("open segment %s: %w", name, err)
	}
	s.seg, s.segName = f, name
	return nil
}

// empty reports whether the storage holds no raft state at all, so that a
// voter must bootstrap.
func (s *diskStorage) empty() bool {
	last, _ := s.mem.LastIndex()
	return last == 0 && raft.IsEmptyHardState(s.hs) && s.snap == nil
}

// setMeta records whose log this is, writing the first segment if there is
// none yet. It fails if the directory belongs to another node or cluster.
func (s *diskStorage) setMeta(m storageMeta) error {
	if s.hasMeta {
		if s.meta.nodeID != m.nodeID {
			return fmt.Errorf("metadata log %s belongs to node %d, not %d", s.dir, s.meta.nodeID, m.nodeID)
		}
		if m.clusterID != "" && s.meta.clusterID != m.clusterID {
			return fmt.Errorf("metadata log %s belongs to cluster %q, not %q", s.dir, s.meta.clusterID, m.clusterID)
		}
		return nil
	}
	s.meta, s.hasMeta = m, true
	return s.writeSegment(0)
}

// writeSegment writes a new segment that starts after index whole, holding
// the meta record, the hard state and the entries after index, then makes
// it the segment appended to and removes older segments and snapshots.
func (s *diskStorage) writeSegment(index uint64) error {
	name := segmentName(index)
	b := appendWALRecord(nil, walMeta, encodeStorageMeta(s.meta))
	if s.hs != nil {
		hs := proto.Clone(s.hs).(*pb.HardState)
		if hs.GetCommit() < index {
			hs.Commit = new(index)
		}
		b = appendWALRecord(b, walHardState, mustMarshal(hs))
	}
	first, _ := s.mem.FirstIndex()
	last, _ := s.mem.LastIndex()
	if last >= first {
		ents, err := s.mem.Entries(first, last+1, ^uint64(0))
		if err != nil {
			return s.fail(fmt.Errorf("write segment %s: %w", name, err))
		}
		for _, e := range ents {
			b = appendWALRecord(b, walEntry, mustMarshal(e))
		}
	}
	path := filepath.Join(s.dir, name)
	if err := vfs.WriteFileAtomic(s.fs, path, b); err != nil {
		return s.fail(fmt.Errorf("write segment %s: %w", name, err))
	}
	old := s.seg
	if err := s.openSegment(name); err != nil {
		return s.fail(err)
	}
	if old != nil {
		old.Close()
	}
	return s.removeOlder(index)
}

// removeOlder deletes segments and snapshots older than index. A crash
// part way leaves extra files that the next recovery reads harmlessly.
func (s *diskStorage) removeOlder(index uint64) error {
	ents, err := s.fs.ReadDir(s.dir)
	if err != nil {
		return s.fail(fmt.Errorf("compact metadata log: %w", err))
	}
	for _, de := range ents {
		i, seg := parseIndexName(de.Name(), segmentSuffix)
		j, snap := parseIndexName(de.Name(), snapSuffix)
		if seg && i < index || snap && j < index {
			if err := s.fs.Remove(filepath.Join(s.dir, de.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return s.fail(fmt.Errorf("compact metadata log: %w", err))
			}
		}
	}
	return nil
}

func mustMarshal(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		// Marshalling a valid in-memory message cannot fail.
		panic(fmt.Sprintf("raftmeta: marshal %T: %v", m, err))
	}
	return b
}

func (s *diskStorage) fail(err error) error {
	if s.err == nil {
		s.err = err
	}
	return err
}

// append makes a Ready's hard state and entries durable (when sync is set)
// and then visible to raft.
func (s *diskStorage) append(hs *pb.HardState, ents []*pb.Entry, sync bool) error {
	if s.err != nil {
		return s.err
	}
	if raft.IsEmptyHardState(hs) && len(ents) == 0 {
		return nil
	}
	b := s.buf[:0]
	for _, e := range ents {
		b = appendWALRecord(b, walEntry, mustMarshal(e))
	}
	if !raft.IsEmptyHardState(hs) {
		b = appendWALRecord(b, walHardState, mustMarshal(hs))
	}
	s.buf = b
	if _, err := s.seg.Write(b); err != nil {
		return s.fail(fmt.Errorf("append to %s: %w", s.segName, err))
	}
	if sync {
		if err := s.seg.Sync(); err != nil {
			return s.fail(fmt.Errorf("sync %s: %w", s.segName, err))
		}
	}
	if err := s.mem.Append(ents); err != nil {
		return s.fail(fmt.Errorf("append entries: %w", err))
	}
	if !raft.IsEmptyHardState(hs) {
		s.hs = proto.Clone(hs).(*pb.HardState)
		if err := s.mem.SetHardState(s.hs); err != nil {
			return s.fail(err)
		}
	}
	return nil
}

// createSnapshot records a snapshot of the applied state at index, then
// compacts the in-memory log up to keepFrom (at most index), so that the
// entries between stay available to followers that lag a little. The
// files keep only what follows the snapshot: after a restart the margin is
// gone until the log grows again.
func (s *diskStorage) createSnapshot(index, keepFrom uint64, cs *pb.ConfState, data []byte) error {
	if s.err != nil {
		return s.err
	}
	snap, err := s.mem.CreateSnapshot(index, cs, data)
	if err != nil {
		return s.fail(fmt.Errorf("create snapshot at %d: %w", index, err))
	}
	if err := s.saveSnapshot(snap); err != nil {
		return err
	}
	keepFrom = min(keepFrom, index)
	if first, _ := s.mem.FirstIndex(); keepFrom >= first {
		if err := s.mem.Compact(keepFrom); err != nil {
			return s.fail(fmt.Errorf("compact to %d: %w", keepFrom, err))
		}
	}
	return s.writeSegment(index)
}

// applySnapshot installs a snapshot received from the leader, replacing the
// whole log.
func (s *diskStorage) applySnapshot(snap *pb.Snapshot) error {
	if s.err != nil {
		return s.err
	}
	if err := s.saveSnapshot(snap); err != nil {
		return err
	}
	if err := s.mem.ApplySnapshot(snap); err != nil {
		return s.fail(fmt.Errorf("apply snapshot at %d: %w", snap.GetMetadata().GetIndex(), err))
	}
	return s.writeSegment(snap.GetMetadata().GetIndex())
}

func (s *diskStorage) saveSnapshot(snap *pb.Snapshot) error {
	idx := snap.GetMetadata().GetIndex()
	b := slices.Clone(snapMagic)
	b = append(b, mustMarshal(snap)...)
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	if err := vfs.WriteFileAtomic(s.fs, filepath.Join(s.dir, snapName(idx)), b); err != nil {
		return s.fail(fmt.Errorf("write snapshot %d: %w", idx, err))
	}
	s.snap = snap
	return nil
}

func readSnapshotFile(fsys vfs.FS, path string) (*pb.Snapshot, error) {
	b, err := vfs.ReadFile(fsys, path)
	if err != nil {
		return nil, fmt.Errorf("read snapshot: %w", err)
	}
	if len(b) < len(snapMagic)+4 || string(b[:len(snapMagic)]) != string(snapMagic) {
		return nil, fmt.Errorf("read snapshot %s: not a snapshot file", path)
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("read snapshot %s: checksum mismatch", path)
	}
	snap := new(pb.Snapshot)
	if err := proto.Unmarshal(body[len(snapMagic):], snap); err != nil {
		return nil, fmt.Errorf("read snapshot %s: %w", path, err)
	}
	return snap, nil
}

func (s *diskStorage) close() error {
	if s.seg == nil {
		return nil
	}
	err := s.seg.Close()
	s.seg = nil
	return err
}

// InitialState implements raft.Storage.
func (s *diskStorage) InitialState() (*pb.HardState, *pb.ConfState, error) {
	return s.mem.InitialState()
}

// Entries implements raft.Storage.
func (s *diskStorage) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	return s.mem.Entries(lo, hi, maxSize)
}

// Term implements raft.Storage.
func (s *diskStorage) Term(i uint64) (uint64, error) { return s.mem.Term(i) }

// LastIndex implements raft.Storage.
func (s *diskStorage) LastIndex() (uint64, error) { return s.mem.LastIndex() }

// FirstIndex implements raft.Storage.
func (s *diskStorage) FirstIndex() (uint64, error) { return s.mem.FirstIndex() }

// Snapshot implements raft.Storage.
func (s *diskStorage) Snapshot() (*pb.Snapshot, error) { return s.mem.Snapshot() }
