package fetch

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch sessions (KIP-227) let a consumer that fetches from many
// partitions send, after a first full request, only the partitions whose
// fetch position changed, and receive only the partitions with news.
//
// Session epochs: a request with session id 0 and epoch 0 opens a session
// (a full fetch); id 0 with epoch -1 is a sessionless full fetch; id N with
// epoch E > 0 is an incremental fetch that must carry the epoch the
// session expects; id N with epoch -1 closes N; id N with epoch 0 closes N
// and opens a new one.
//
// As in Kafka's FetchManager, an incremental fetch checks and advances the
// session's epoch when it is planned, and its answer is built only if the
// epoch is still the one it set: a second fetch naming the session while
// the first one long-polls is answered at once (INVALID_FETCH_SESSION_EPOCH
// if it carries the old epoch), and the one that lost the race is answered
// INVALID_FETCH_SESSION_EPOCH when it ends. No lock is held while a fetch
// reads or waits.
const (
	// FinalEpoch is the session epoch of a request that closes its
	// session, or asks for none.
	FinalEpoch = -1
	// evictAfter is Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS:
	// a session unused this long may be evicted by any new one, and a
	// session younger than this is protected from eviction by size.
	evictAfter = 2 * time.Minute
)

// Part is a partition in a session: where the client reads from, and what
// the last answer told it, so that an incremental answer can leave out the
// partitions with nothing new.
type Part struct {
	Topic       string
	TopicID     [16]byte
	Partition   int32
	FetchOffset int64
	MaxBytes    int32
	LeaderEpoch int32

	SentHW, SentLSO, SentLogStart int64
}

type partKey struct {
	topic     string
	partition int32
}

// Session is one client's session. Lock it to read or change its epoch and
// partitions.
type Session struct {
	id         int32
	privileged bool // opened by a follower's fetch: evicted last
	created    time.Time

	// Guarded by Sessions.mu: the cache's view, for eviction.
	lastUsed   time.Time
	cachedSize int  // partitions, as of the last touch
	evictable  bool // evictable by any new session (older than evictAfter at its last touch)

	// mu guards what follows. It is held only for a moment, never across
	// a read or a long poll.
	mu sync.Mutex
	// Epoch is the epoch the next incremental fetch must carry.
	Epoch int32
	parts map[partKey]*Part
	order []partKey // the order of the answer
}

// ID is the session's id, which the client names it by.
func (fs *Session) ID() int32 { return fs.id }

// Lock takes the session's lock, held only for a moment, never across a
// read or a long poll; the cache's lock may be taken under it (Touch).
func (fs *Session) Lock() { fs.mu.Lock() }

// Unlock lets go of the session's lock.
func (fs *Session) Unlock() { fs.mu.Unlock() }

// Len is the number of partitions in the session. The caller holds its lock.
func (fs *Session) Len() int { return len(fs.parts) }

// Copies are copies of the session's partitions in the order of the
// answer, for a fetch to read without the lock. The caller holds it.
func (fs *Session) Copies() []*Part {
	out := make([]*Part, 0, len(fs.order))
	for _, k := range fs.order {
		cp := *fs.parts[k]
		out = append(out, &cp)
	}
	return out
}

// Upsert adds p to the session, or updates where the client reads the
// partition from. The caller holds the session's lock.
func (fs *Session) Upsert(p Part) {
	k := partKey{p.Topic, p.Partition}
	if cur, ok := fs.parts[k]; ok {
		cur.FetchOffset = p.FetchOffset
		cur.MaxBytes = p.MaxBytes
		cur.LeaderEpoch = p.LeaderEpoch
		cur.TopicID = p.TopicID
		return
	}
	p.SentHW, p.SentLSO, p.SentLogStart = -1, -1, -1
	fs.parts[k] = &p
	fs.order = append(fs.order, k)
}

// Remove drops a partition the client forgot. The caller holds the
// session's lock.
func (fs *Session) Remove(topic string, partition int32) {
	k := partKey{topic, partition}
	if _, ok := fs.parts[k]; !ok {
		return
	}
	delete(fs.parts, k)
	fs.removeFromOrder(k)
}

func (fs *Session) removeFromOrder(k partKey) {
	for i, o := range fs.order {
		if o == k {
			fs.order = append(fs.order[:i], fs.order[i+1:]...)
			return
		}
	}
}

// moveToEnd puts a partition that just returned records last, so that
// the next answers start with the others (Kafka's round robin within a
// session, which keeps one busy partition from starving the rest).
func (fs *Session) moveToEnd(k partKey) {
	fs.removeFromOrder(k)
	fs.order = append(fs.order, k)
}

// NextEpoch is Kafka's FetchMetadata.nextEpoch: epochs wrap from
// MaxInt32 to 1.
func NextEpoch(e int32) int32 {
	if e < 0 || e == 1<<31-1 {
		return 1
	}
	return e + 1
}

// Sessions is the broker's session cache, bounded by
// max.incremental.fetch.session.cache.slots with Kafka's eviction rules
// (FetchSessionCacheShard.tryEvict, over one shard): when full, a new
// session evicts the least recently used one if it has been idle for
// evictAfter; failing that, the smallest evictable session —
// a consumer's before a follower's, fewer partitions first — if the new
// one is not smaller; failing that, the client gets a sessionless answer
// (id 0).
type Sessions struct {
	mu        sync.Mutex
	max       int
	sessions  map[int32]*Session
	evictions int64 // sessions evicted to make room, for the metrics
}

// NewSessions is an empty cache of at most max sessions.
func NewSessions(max int) *Sessions {
	return &Sessions{max: max, sessions: make(map[int32]*Session)}
}

// Create opens a session holding parts, or returns nil when there is no
// room and nothing may be evicted for it.
func (c *Sessions) Create(now time.Time, privileged bool, parts []Part) *Session {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.sessions) >= c.max && !c.tryEvictLocked(privileged, len(parts), now) {
		return nil
	}
	var id int32
	for id <= 0 || c.sessions[id] != nil {
		id = rand.Int32()
	}
	s := &Session{id: id, privileged: privileged, created: now, Epoch: NextEpoch(0),
		parts: make(map[partKey]*Part, len(parts))}
	for _, p := range parts {
		k := partKey{p.Topic, p.Partition}
		if _, dup := s.parts[k]; !dup {
			s.order = append(s.order, k)
		}
		s.parts[k] = &p
	}
	c.sessions[id] = s
	c.touchLocked(s, now, len(s.parts))
	return s
}

// Touch records a use of s, which now holds size partitions. The caller
// may hold s's lock: the cache lock is taken after it, never before.
func (c *Sessions) Touch(s *Session, now time.Time, size int) {
	c.mu.Lock()
	c.touchLocked(s, now, size)
	c.mu.Unlock()
}

func (c *Sessions) touchLocked(s *Session, now time.Time, size int) {
	s.lastUsed = now
	s.cachedSize = size
	s.evictable = now.Sub(s.created) > evictAfter
}

// tryEvictLocked makes room for a new session of size partitions.
func (c *Sessions) tryEvictLocked(privileged bool, size int, now time.Time) bool {
	var lru, smallest *Session
	for _, s := range c.sessions {
		if lru == nil || s.lastUsed.Before(lru.lastUsed) || s.lastUsed.Equal(lru.lastUsed) && s.id < lru.id {
			lru = s
		}
		// A follower's new session may evict a consumer's at any age; a
		// consumer's may evict only sessions past their protected youth.
		if s.evictable || privileged && !s.privileged {
			if smallest == nil || evictKeyLess(s.privileged, s.cachedSize, s.id, smallest) {
				smallest = s
			}
		}
	}
	switch {
	case lru == nil:
		return false
	case now.Sub(lru.lastUsed) > evictAfter:
		delete(c.sessions, lru.id)
	case smallest == nil || evictKeyLess(privileged, size, 0, smallest):
		return false
	default:
		delete(c.sessions, smallest.id)
	}
	c.evictions++
	return true
}

// evictKeyLess orders sessions as Kafka's EvictableKey: consumers before
// followers, then fewer partitions, then lower id.
func evictKeyLess(privileged bool, size int, id int32, than *Session) bool {
	if privileged != than.privileged {
		return !privileged
	}
	if size != than.cachedSize {
		return size < than.cachedSize
	}
	return id < than.id
}

// Get is the session with the id, or nil.
func (c *Sessions) Get(id int32) *Session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions[id]
}

// Remove closes the session with the id, if there is one.
func (c *Sessions) Remove(id int32) {
	c.mu.Lock()
	delete(c.sessions, id)
	c.mu.Unlock()
}

// SessionStats is what Kafka's FetchSessionCache reports of itself.
type SessionStats struct {
	// Sessions is the number of cached sessions
	// (NumIncrementalFetchSessions).
	Sessions int
	// PartitionsCached is the partitions they hold, each session's as of
	// its last use (NumIncrementalFetchPartitionsCached).
	PartitionsCached int
	// Evictions counts the sessions evicted to make room for new ones
	// since start (IncrementalFetchSessionEvictionsPerSec).
	Evictions int64
}

// Stats reads the cache's figures, for the metrics.
func (c *Sessions) Stats() SessionStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := SessionStats{Sessions: len(c.sessions), Evictions: c.evictions}
	for _, s := range c.sessions {
		st.PartitionsCached += s.cachedSize
	}
	return st
}

// Len is the number of cached sessions.
func (c *Sessions) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sessions)
}

// RecordSent decides whether an incremental answer includes a partition
// (records, an error, or offsets the client has not been told) and, if
// so, records what it tells the client. The caller holds the session's
// lock.
func (fs *Session) RecordSent(fp *Part, rp kmsg.FetchResponseTopicPartition, hasRecords bool) bool {
	k := partKey{fp.Topic, fp.Partition}
	sp, ok := fs.parts[k]
	if !ok {
		return false
	}
	changed := hasRecords || rp.ErrorCode != 0 ||
		rp.HighWatermark != sp.SentHW || rp.LastStableOffset != sp.SentLSO || rp.LogStartOffset != sp.SentLogStart
	if !changed {
		return false
	}
	sp.SentHW, sp.SentLSO, sp.SentLogStart = rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset
	if hasRecords {
		fs.moveToEnd(k)
	}
	return true
}
