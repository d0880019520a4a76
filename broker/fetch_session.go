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
const (
	fetchSessionFinalEpoch = -1
	fetchSessionIdleTime   = 2 * time.Minute
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

// fetchSession is one client's session. Its owner is the fetch that holds
// mu; a client sends one fetch of a session at a time.
type fetchSession struct {
	id    int32
	mu    sync.Mutex
	epoch int32 // the epoch the next incremental fetch must carry; each answer adds one
	parts map[fetchSessionKey]*fetchSessionPart
	order []fetchSessionKey // insertion order, the order of the answer
	used  time.Time
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
	for i, o := range fs.order {
		if o == k {
			fs.order = append(fs.order[:i], fs.order[i+1:]...)
			break
		}
	}
}

// fetchSessions is the broker's session cache, bounded as Kafka's
// max.incremental.fetch.session.cache.slots: when full, idle sessions are
// evicted, and failing that a client gets a sessionless answer (id 0).
type fetchSessions struct {
	mu       sync.Mutex
	max      int
	sessions map[int32]*fetchSession
}

func newFetchSessions(max int) *fetchSessions {
	return &fetchSessions{max: max, sessions: make(map[int32]*fetchSession)}
}

// create opens a session, or returns nil when the cache is full.
func (c *fetchSessions) create(now time.Time) *fetchSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.sessions) >= c.max {
		for id, s := range c.sessions {
			if now.Sub(s.used) > fetchSessionIdleTime {
				delete(c.sessions, id)
			}
		}
		if len(c.sessions) >= c.max {
			return nil
		}
	}
	var id int32
	for id == 0 || c.sessions[id] != nil {
		id = rand.Int32()
	}
	s := &fetchSession{id: id, epoch: 0, parts: make(map[fetchSessionKey]*fetchSessionPart), used: now}
	c.sessions[id] = s
	return s
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
