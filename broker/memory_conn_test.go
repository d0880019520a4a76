package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/protocol"
)

// longPoll is a Fetch of an empty partition that the broker holds for
// wait before answering empty.
func longPoll(topic string, wait time.Duration) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(wait.Milliseconds())
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rp.CurrentLeaderEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// timedApiVersions sends an ApiVersions on c and returns how long its
// answer took.
func timedApiVersions(c *rawConn, corr int32) time.Duration {
	start := time.Now()
	c.request(kmsg.NewPtrApiVersionsRequest(), corr)
	return time.Since(start)
}

// TestIdleConnectionClosed: connections.max.idle.ms closes a connection
// with nothing arriving and nothing unanswered, and not before.
func TestIdleConnectionClosed(t *testing.T) {
	ts := startServer(t, "", func(c *config.Broker) { c.ConnectionsMaxIdleMs = 400 })
	c := dialRaw(t, ts.addr)
	timedApiVersions(c, 1)
	for i := range 4 {
		// Activity every 200 ms keeps it open past the idle time.
		time.Sleep(200 * time.Millisecond)
		timedApiVersions(c, int32(2+i))
	}
	start := time.Now()
	c.expectClosed()
	if idle := time.Since(start); idle < 300*time.Millisecond || idle > 3*time.Second {
		t.Fatalf("closed after %v idle, want about 400ms", idle)
	}
	goodClientWorks(t, ts)
}

// TestIdleTimeoutSparesUnansweredRequest: a long poll longer than
// connections.max.idle.ms is the broker's wait, not the client's idleness:
// the connection stays open and the answer arrives.
func TestIdleTimeoutSparesUnansweredRequest(t *testing.T) {
	ts := startServer(t, "", func(c *config.Broker) { c.ConnectionsMaxIdleMs = 300 })
	createTopic(t, ts.admin(t), "idle-poll", 1, nil)
	c := dialRaw(t, ts.addr)
	start := time.Now()
	c.request(longPoll("idle-poll", 1500*time.Millisecond), 1)
	if took := time.Since(start); took < time.Second {
		t.Fatalf("long poll answered after %v, want about 1.5s", took)
	}
	timedApiVersions(c, 2)
}

// TestIdleTimeoutCountsFromAnswer: the idle time of a connection whose
// long poll was answered counts from the answer, as Kafka's idle expiry
// counts from a connection's last read or write: a client that sends its
// next request within the idle time of reading the answer is served. (The
// broker used to count from its last check of the unanswered request, up
// to an idle time before the answer, and closed such a connection; seen
// as TestIdleTimeoutSparesUnansweredRequest's EOF under -cpu 1.)
func TestIdleTimeoutCountsFromAnswer(t *testing.T) {
	const idle = time.Second
	ts := startServer(t, "", func(c *config.Broker) { c.ConnectionsMaxIdleMs = idle.Milliseconds() })
	createTopic(t, ts.admin(t), "idle-answer", 1, nil)
	c := dialRaw(t, ts.addr)
	// Answered after 2.5 s: the checks of the unanswered poll come at
	// about 1 and 2 s, the first after the answer at about 3 s, well
	// before the 3.5 s that the idle time gives.
	c.request(longPoll("idle-answer", 2500*time.Millisecond), 1)
	time.Sleep(650 * time.Millisecond)
	timedApiVersions(c, 2)
	// Quiet past the idle time after that answer, it is closed.
	start := time.Now()
	c.expectClosed()
	if took := time.Since(start); took < idle*3/4 {
		t.Fatalf("closed %v after the last answer, want about %v", took, idle)
	}
}

// TestPartialFrameTimesOut: a frame declared at 100 MiB of which ten
// bytes arrive is dropped, and its connection closed, once the frame read
// timeout passes after its first byte.
func TestPartialFrameTimesOut(t *testing.T) {
	ts := startServer(t, "")
	ts.limits().frameTimeout.Store(int64(500 * time.Millisecond))
	c := dialRaw(t, ts.addr)
	start := time.Now()
	c.write([]byte{0x06, 0x40, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	c.expectClosed()
	if took := time.Since(start); took < 400*time.Millisecond || took > 5*time.Second {
		t.Fatalf("closed after %v, want about 500ms", took)
	}
	// A request whose bytes come slowly but within the timeout is served.
	c = dialRaw(t, ts.addr)
	frame := encodeRequest(kmsg.NewPtrApiVersionsRequest(), 9)
	for _, b := range frame[:len(frame)-1] {
		c.write([]byte{b})
		time.Sleep(10 * time.Millisecond)
	}
	c.write(frame[len(frame)-1:])
	if _, err := readResponse(c); err != nil {
		t.Fatalf("slow but timely request: %v", err)
	}
}

// TestQueuedMaxRequestBytesWaits: with queued.max.request.bytes spent by a
// long poll on one connection, another connection's request waits until
// the poll is answered; without the setting it does not wait.
func TestQueuedMaxRequestBytesWaits(t *testing.T) {
	for _, tc := range []struct {
		budget int64
		waits  bool
	}{{-1, false}, {10, true}} {
		ts := startServer(t, "", func(c *config.Broker) { c.QueuedMaxRequestBytes = tc.budget })
		createTopic(t, ts.admin(t), "budget-poll", 1, nil)
		poller := dialRaw(t, ts.addr)
		poller.write(encodeRequest(longPoll("budget-poll", 1500*time.Millisecond), 1))
		time.Sleep(200 * time.Millisecond) // the poll is read and parked
		took := timedApiVersions(dialRaw(t, ts.addr), 1)
		if waited := took > time.Second; waited != tc.waits {
			t.Fatalf("budget %d: ApiVersions answered after %v, want waiting %v", tc.budget, took, tc.waits)
		}
		if _, err := readResponse(poller); err != nil {
			t.Fatalf("budget %d: long poll: %v", tc.budget, err)
		}
	}
}

// TestQueuedMaxRequestsSparesParked: with queued.max.requests=1, a parked
// long poll holds no place, so other connections are served meanwhile.
func TestQueuedMaxRequestsSparesParked(t *testing.T) {
	ts := startServer(t, "", func(c *config.Broker) { c.QueuedMaxRequests = 1 })
	createTopic(t, ts.admin(t), "queued-poll", 1, nil)
	poller := dialRaw(t, ts.addr)
	poller.write(encodeRequest(longPoll("queued-poll", 1500*time.Millisecond), 1))
	time.Sleep(200 * time.Millisecond)
	for i := range 5 {
		if took := timedApiVersions(dialRaw(t, ts.addr), int32(i)); took > time.Second {
			t.Fatalf("ApiVersions answered after %v behind a parked poll", took)
		}
	}
	if _, err := readResponse(poller); err != nil {
		t.Fatalf("long poll: %v", err)
	}
}

// readResponse reads one response frame from c.
func readResponse(c *rawConn) ([]byte, error) {
	return protocol.ReadFrame(c.nc, 1<<30, nil)
}
