package console

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	defaultLimit = 50
	maxLimit     = 500
	maxWait      = 10 * time.Second
	// maxShown is how many bytes of a key, value or header value are
	// sent to the page; the size says how many there were.
	maxShown = 64 << 10
)

// dataJSON is a key, value or header value as the page shows it: as
// UTF-8 text when it is valid UTF-8 (and as JSON when the text parses),
// else as hex.
type dataJSON struct {
	Null      bool   `json:"null"`
	Size      int    `json:"size"`
	UTF8      bool   `json:"utf8"`
	JSON      bool   `json:"json"`
	Text      string `json:"text,omitempty"`
	Hex       string `json:"hex"`
	Truncated bool   `json:"truncated"`
}

func decode(b []byte) dataJSON {
	if b == nil {
		return dataJSON{Null: true}
	}
	d := dataJSON{Size: len(b), UTF8: utf8.Valid(b), JSON: json.Valid(b)}
	shown := b
	if len(shown) > maxShown {
		shown, d.Truncated = shown[:maxShown], true
		// Cut at a rune boundary so the text stays valid.
		for i := 0; d.UTF8 && i < utf8.UTFMax && !utf8.Valid(shown); i++ {
			shown = shown[:len(shown)-1]
		}
	}
	if d.UTF8 {
		d.Text = string(shown)
	}
	d.Hex = hex.EncodeToString(shown)
	return d
}

type headerJSON struct {
	Key   string   `json:"key"`
	Value dataJSON `json:"value"`
}

type recordJSON struct {
	Partition   int32        `json:"partition"`
	Offset      int64        `json:"offset"`
	Timestamp   int64        `json:"timestamp"`
	LeaderEpoch int32        `json:"leader_epoch"`
	Key         dataJSON     `json:"key"`
	Value       dataJSON     `json:"value"`
	Headers     []headerJSON `json:"headers"`
}

type recordsJSON struct {
	Topic       string       `json:"topic"`
	Partition   int32        `json:"partition"`
	From        int64        `json:"from"`
	Next        int64        `json:"next"`
	StartOffset int64        `json:"start_offset"`
	EndOffset   int64        `json:"end_offset"`
	Records     []recordJSON `json:"records"`
}

// records reads up to limit records of one partition from an offset
// (offset=N, start or end: the last limit records) or from the first
// record at or after a time (time=UNIX-MS or RFC 3339), with a consumer
// of its own. wait=MS waits that long for records past the end: the
// page's live tail asks again from next.
func (c *Console) records(r *http.Request, _ *kgo.Client, adm *kadm.Client, seeds []string) (any, error) {
	topic := r.PathValue("topic")
	q := r.URL.Query()
	part, err := intParam(q, "partition", 0, 0, 1<<31-1)
	if err != nil {
		return nil, err
	}
	limit, err := intParam(q, "limit", defaultLimit, 1, maxLimit)
	if err != nil {
		return nil, err
	}
	waitMs, err := intParam(q, "wait", 0, 0, maxWait.Milliseconds())
	if err != nil {
		return nil, err
	}
	p := int32(part)
	ctx := r.Context()
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("list start offsets of %s: %w", topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("list end offsets of %s: %w", topic, err)
	}
	s, ok1 := starts.Lookup(topic, p)
	e, ok2 := ends.Lookup(topic, p)
	if !ok1 || !ok2 {
		return nil, httpError{http.StatusNotFound, fmt.Errorf("no partition %d of topic %s", p, topic)}
	}
	if s.Err != nil || e.Err != nil {
		return nil, fmt.Errorf("list offsets of %s-%d: %v %v", topic, p, s.Err, e.Err)
	}
	out := recordsJSON{Topic: topic, Partition: p, StartOffset: s.Offset, EndOffset: e.Offset, Records: []recordJSON{}}

	var from int64
	switch ts, off := q.Get("time"), q.Get("offset"); {
	case ts != "":
		ms, err := parseTime(ts)
		if err != nil {
			return nil, badRequest("time %q: %v", ts, err)
		}
		after, err := adm.ListOffsetsAfterMilli(ctx, ms, topic)
		if err != nil {
			return nil, fmt.Errorf("list offsets of %s after %d: %w", topic, ms, err)
		}
		l, ok := after.Lookup(topic, p)
		switch {
		case !ok || l.Err != nil:
			return nil, fmt.Errorf("list offsets of %s-%d after %d: %v", topic, p, ms, l.Err)
		case l.Offset < 0: // no record at or after that time
			from = e.Offset
		default:
			from = l.Offset
		}
	case off == "" || off == "start":
		from = s.Offset
	case off == "end":
		from = max(s.Offset, e.Offset-int64(limit))
	default:
		n, err := strconv.ParseInt(off, 10, 64)
		if err != nil {
			return nil, badRequest("offset %q: a number, start or end", off)
		}
		from = min(max(n, s.Offset), e.Offset)
	}
	out.From, out.Next = from, from
	if from >= e.Offset && waitMs == 0 {
		return out, nil
	}
	recs, next, err := c.readPartition(ctx, seeds, topic, p, from, e.Offset, int(limit), time.Duration(waitMs)*time.Millisecond)
	if err != nil {
		return nil, err
	}
	out.Records, out.Next = recs, max(next, from)
	return out, nil
}

// readPartition consumes topic-p from offset: up to limit records, until
// end when wait is 0, else until the first records past from arrive or
// wait runs out. It keeps control records (transaction markers) only to
// know how far it has read: they are not shown.
func (c *Console) readPartition(ctx context.Context, seeds []string, topic string, p int32, from, end int64, limit int, wait time.Duration) ([]recordJSON, int64, error) {
	maxWaitMs := int32(500)
	if wait > 0 {
		maxWaitMs = int32(min(wait, maxWait).Milliseconds())
	}
	cl, err := kgo.NewClient(c.clientOpts(seeds,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(from)}}),
		kgo.KeepControlRecords(), kgo.FetchMaxWait(time.Duration(maxWaitMs)*time.Millisecond))...)
	if err != nil {
		return nil, from, fmt.Errorf("read %s-%d: %w", topic, p, err)
	}
	defer cl.Close()
	deadline := 5 * time.Second
	if wait > 0 {
		deadline = wait
	}
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	recs := []recordJSON{}
	next := from
	for len(recs) < limit {
		fs := cl.PollRecords(ctx, limit-len(recs))
		if ctx.Err() != nil {
			break
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return nil, from, fmt.Errorf("read %s-%d at %d: %w", topic, p, next, ferr)
		}
		fs.EachRecord(func(rec *kgo.Record) {
			if rec.Offset < next || len(recs) >= limit {
				return
			}
			next = rec.Offset + 1
			if rec.Attrs.IsControl() {
				return
			}
			rj := recordJSON{Partition: rec.Partition, Offset: rec.Offset, Timestamp: rec.Timestamp.UnixMilli(),
				LeaderEpoch: rec.LeaderEpoch, Key: decode(rec.Key), Value: decode(rec.Value), Headers: []headerJSON{}}
			for _, h := range rec.Headers {
				rj.Headers = append(rj.Headers, headerJSON{Key: h.Key, Value: decode(h.Value)})
			}
			recs = append(recs, rj)
		})
		if wait > 0 && len(recs) > 0 {
			break
		}
		if wait == 0 && next >= end {
			break
		}
	}
	return recs, next, nil
}

// parseTime takes milliseconds since the epoch or an RFC 3339 time.
func parseTime(s string) (int64, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return ms, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("neither milliseconds nor RFC 3339")
	}
	return t.UnixMilli(), nil
}

func intParam(q url.Values, name string, dflt, lo, hi int64) (int64, error) {
	v := q.Get(name)
	if v == "" {
		return dflt, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, badRequest("%s %q: a number from %d to %d", name, v, lo, hi)
	}
	return n, nil
}

// produceRequest is the page's form: text key, value and headers; a nil
// key or value is a null one; a nil partition lets the client's default
// partitioner choose (by key hash, as every Kafka client).
type produceRequest struct {
	Partition *int32  `json:"partition"`
	Key       *string `json:"key"`
	Value     *string `json:"value"`
	Headers   []struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	} `json:"headers"`
}

// produce appends one record with a producer of its own and answers
// where it went. It is refused when the console is read-only, and for a
// request a page of another origin could have sent (a form or a
// cross-site fetch): it must be JSON, which a browser sends across
// origins only after a preflight this server never grants, and carry
// no foreign Origin.
func (c *Console) produce(r *http.Request, _ *kgo.Client, adm *kadm.Client, _ []string) (any, error) {
	if c.cfg.ReadOnly {
		return nil, httpError{http.StatusForbidden, fmt.Errorf("the console is read-only (http.console.read.only=true)")}
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		return nil, httpError{http.StatusUnsupportedMediaType, fmt.Errorf("produce takes application/json")}
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || !strings.EqualFold(u.Host, r.Host) {
			return nil, httpError{http.StatusForbidden, fmt.Errorf("origin %q is not this console's", o)}
		}
	}
	var req produceRequest
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 4<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, badRequest("produce: %v", err)
	}
	topic := r.PathValue("topic")
	md, err := adm.ListTopicsWithInternal(r.Context(), topic)
	if err != nil {
		return nil, fmt.Errorf("produce to %s: %w", topic, err)
	}
	td, ok := md[topic]
	if !ok || td.Err != nil {
		return nil, httpError{http.StatusNotFound, fmt.Errorf("produce to %s: no such topic (or not one this console may describe): %v", topic, td.Err)}
	}
	ctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
	defer cancel()
	rec := &kgo.Record{Topic: topic, Context: ctx}
	if req.Partition != nil {
		if *req.Partition < 0 || int(*req.Partition) >= len(td.Partitions) {
			return nil, badRequest("produce to %s: no partition %d (it has %d)", topic, *req.Partition, len(td.Partitions))
		}
		rec.Context = context.WithValue(ctx, partitionKey{}, *req.Partition)
	}
	if req.Key != nil {
		rec.Key = []byte(*req.Key)
	}
	if req.Value != nil {
		rec.Value = []byte(*req.Value)
	}
	for _, h := range req.Headers {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: []byte(h.Value)})
	}
	c.mu.Lock()
	prod := c.prod
	c.mu.Unlock()
	if prod == nil {
		return nil, errOff{"stopped"}
	}
	if err := prod.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return nil, fmt.Errorf("produce to %s: %w", topic, err)
	}
	c.log.Info("console produced a record", "topic", topic, "partition", rec.Partition, "offset", rec.Offset)
	return struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		Offset    int64  `json:"offset"`
		Timestamp int64  `json:"timestamp"`
	}{topic, rec.Partition, rec.Offset, rec.Timestamp.UnixMilli()}, nil
}

// partitionKey marks, in a record's Context, the partition the form
// chose.
type partitionKey struct{}

// formPartitioner sends a record to the partition its Context names, and
// any other by the client's default (the key's murmur2 hash, as Kafka's
// clients; sticky for null keys).
type formPartitioner struct{ dflt kgo.Partitioner }

func (p formPartitioner) ForTopic(topic string) kgo.TopicPartitioner {
	return formTopicPartitioner{p.dflt.ForTopic(topic)}
}

type formTopicPartitioner struct{ dflt kgo.TopicPartitioner }

func chosen(r *kgo.Record) (int32, bool) {
	if r.Context == nil {
		return 0, false
	}
	p, ok := r.Context.Value(partitionKey{}).(int32)
	return p, ok
}

func (p formTopicPartitioner) RequiresConsistency(r *kgo.Record) bool {
	if _, ok := chosen(r); ok {
		return true
	}
	return p.dflt.RequiresConsistency(r)
}

func (p formTopicPartitioner) Partition(r *kgo.Record, n int) int {
	if c, ok := chosen(r); ok {
		return int(c)
	}
	return p.dflt.Partition(r, n)
}

// OnNewBatch lets the sticky default move keyless records on.
func (p formTopicPartitioner) OnNewBatch() {
	if o, ok := p.dflt.(kgo.TopicPartitionerOnNewBatch); ok {
		o.OnNewBatch()
	}
}
