package broker

import (
	"math/rand/v2"
	"sync"
	"time"
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
	fetchSessionFinalEpoch = -1
	// fetchSessionEvictAfter is Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS:
	// a session unused this long may be evicted by any new one, and a
	// session younger than this is protected from eviction by size.
	fetchSessionEvictAfter = 2 * time.Minute
)

// fetchSessionPart is a partition in a session: where the client reads
// from, and what the last answer told it, so that an incremental answer
// can leave out the partitions with nothing new.
type fetchSessionPart struct {
	topic       string
	topicID     [16]byte
	partition   int32
	fetchOffset int64
	maxBytes    int32
	leaderEpoch int32

	sentHW, sentLSO, sentLogStart int64
}

type fetchSessionKey struct {
	topic     string
	partition int32
}

// fetchSession is one client's session.
type fetchSession struct {
	id         int32
	privileged bool // opened by a follower's fetch: evicted last
	created    time.Time

	// Guarded by fetchSessions.mu: the cache's view, for eviction.
	lastUsed   time.Time
	cachedSize int  // partitions, as of the last touch
	evictable  bool // evictable by any new session (older than fetchSessionEvictAfter at its last touch)

	// mu guards what follows. It is held only for a moment, never across
	// a read or a long poll.
	mu    sync.Mutex
	epoch int32 // the epoch the next incremental fetch must carry
	parts map[fetchSessionKey]*fetchSessionPart
	order []fetchSessionKey // the order of the answer
}

func (fs *fetchSession) upsert(p fetchSessionPart) {
	k := fetchSessionKey{p.topic, p.partition}
	if cur, ok := fs.parts[k]; ok {
		cur.fetchOffset = p.fetchOffset
		cur.maxBytes = p.maxBytes
		cur.leaderEpoch = p.leaderEpoch
		cur.topicID = p.topicID
		return
	}
	p.sentHW, p.sentLSO, p.sentLogStart = -1, -1, -1
	fs.parts[k] = &p
	fs.order = append(fs.order, k)
}

func (fs *fetchSession) remove(topic string, partition int32) {
	k := fetchSessionKey{topic, partition}
	if _, ok := fs.parts[k]; !ok {
		return
	}
	delete(fs.parts, k)
	fs.removeFromOrder(k)
}

func (fs *fetchSession) removeFromOrder(k fetchSessionKey) {
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
func (fs *fetchSession) moveToEnd(k fetchSessionKey) {
	fs.removeFromOrder(k)
	fs.order = append(fs.order, k)
}

// nextFetchEpoch is Kafka's FetchMetadata.nextEpoch: epochs wrap from
// MaxInt32 to 1.
func nextFetchEpoch(e int32) int32 {
	if e < 0 || e == 1<<31-1 {
		return 1
	}
	return e + 1
}

// fetchSessions is the broker's session cache, bounded by
// max.incremental.fetch.session.cache.slots with Kafka's eviction rules
// (FetchSessionCacheShard.tryEvict, over one shard): when full, a new
// session evicts the least recently used one if it has been idle for
// fetchSessionEvictAfter; failing that, the smallest evictable session —
// a consumer's before a follower's, fewer partitions first — if the new
// one is not smaller; failing that, the client gets a sessionless answer
// (id 0).
type fetchSessions struct {
	mu        sync.Mutex
	max       int
	sessions  map[int32]*fetchSession
	evictions int64 // sessions evicted to make room, for tests and logs
}

func newFetchSessions(max int) *fetchSessions {
	return &fetchSessions{max: max, sessions: make(map[int32]*fetchSession)}
}

// create opens a session holding parts, or returns nil when there is no
// room and nothing may be evicted for it.
func (c *fetchSessions) create(now time.Time, privileged bool, parts []fetchSessionPart) *fetchSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.sessions) >= c.max && !c.tryEvictLocked(privileged, len(parts), now) {
		return nil
	}
	var id int32
	for id <= 0 || c.sessions[id] != nil {
		id = rand.Int32()
	}
	s := &fetchSession{id: id, privileged: privileged, created: now, epoch: nextFetchEpoch(0),
		parts: make(map[fetchSessionKey]*fetchSessionPart, len(parts))}
	for _, p := range parts {
		k := fetchSessionKey{p.topic, p.partition}
		if _, dup := s.parts[k]; !dup {
			s.order = append(s.order, k)
		}
		s.parts[k] = &p
	}
	c.sessions[id] = s
	c.touchLocked(s, now, len(s.parts))
	return s
}

// touch records a use of s, which now holds size partitions. The caller
// may hold s.mu: the cache lock is taken after it, never before.
func (c *fetchSessions) touch(s *fetchSession, now time.Time, size int) {
	c.mu.Lock()
	c.touchLocked(s, now, size)
	c.mu.Unlock()
}

func (c *fetchSessions) touchLocked(s *fetchSession, now time.Time, size int) {
	s.lastUsed = now
	s.cachedSize = size
	s.evictable = now.Sub(s.created) > fetchSessionEvictAfter
}

// tryEvictLocked makes room for a new session of size partitions.
func (c *fetchSessions) tryEvictLocked(privileged bool, size int, now time.Time) bool {
	var lru, smallest *fetchSession
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
	case now.Sub(lru.lastUsed) > fetchSessionEvictAfter:
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
func evictKeyLess(privileged bool, size int, id int32, than *fetchSession) bool {
	if privileged != than.privileged {
		return !privileged
	}
	if size != than.cachedSize {
		return size < than.cachedSize
	}
	return id < than.id
}

func (c *fetchSessions) get(id int32) *fetchSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions[id]
}

func (c *fetchSessions) remove(id int32) {
	c.mu.Lock()
	delete(c.sessions, id)
	c.mu.Unlock()
}

// len is the number of cached sessions.
func (c *fetchSessions) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sessions)
}
