package broker

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/protocol"
)

// Kafka's request validation, API by API: each row sends one request over
// a real socket to an in-process broker and checks the error codes of the
// answer and, for requests that would change something, that nothing
// changed.

// exchange sends req at its version on c and decodes the answer.
func exchange(t *testing.T, c *rawConn, req kmsg.Request) kmsg.Response {
	t.Helper()
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	body := c.request(req, 1)
	if resp.IsFlexible() {
		if len(body) == 0 || body[0] != 0 {
			t.Fatalf("flexible response header with tagged fields: % x", body[:min(len(body), 8)])
		}
		body = body[1:] // the header's empty tagged fields
	}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("decode %T: %v", resp, err)
	}
	return resp
}

// batchOf builds a batch of values with the given producer fields,
// attributes and codec.
func batchOf(t *testing.T, pid int64, epoch int16, attrs int16, codec protocol.Codec, values ...string) []byte {
	t.Helper()
	var recs []protocol.Record
	for i, v := range values {
		recs = append(recs, protocol.Record{OffsetDelta: int32(i), Value: []byte(v)})
	}
	seq := int32(-1)
	if pid >= 0 {
		seq = 0
	}
	now := time.Now().UnixMilli()
	h := protocol.BatchHeader{FirstTimestamp: now, MaxTimestamp: now, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, Attributes: attrs}
	b, err := protocol.BuildBatch(h, recs, codec)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// logEnd is the log end offset of a partition this broker hosts.
func logEnd(t *testing.T, ts *testServer, topic string, partition int32) int64 {
	t.Helper()
	p := ts.parts.get(topic, partition)
	if p == nil {
		t.Fatalf("%s-%d not hosted", topic, partition)
	}
	return p.Log.LogEndOffset()
}

// tp names a partition in a table row.
type tp struct {
	topic     string
	partition int32
}

func (p tp) String() string { return fmt.Sprintf("%s-%d", p.topic, p.partition) }

// producePart is one partition's records in a produce row.
type producePart struct {
	tp
	records []byte
}

func produceRequest(version, acks int16, txnID *string, parts ...producePart) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(version)
	req.Acks = acks
	req.TimeoutMillis = 5000
	req.TransactionID = txnID
	for _, p := range parts {
		i := slices.IndexFunc(req.Topics, func(t kmsg.ProduceRequestTopic) bool { return t.Topic == p.topic })
		if i < 0 {
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = p.topic
			req.Topics = append(req.Topics, rt)
			i = len(req.Topics) - 1
		}
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = p.partition
		rp.Records = p.records
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	return req
}

// TestValidateProduce mirrors KafkaApis.handleProduceRequest,
// ProduceRequest.validateRecords and ReplicaManager.handleProduceAppend /
// appendRecords / appendToLocalLog.
func TestValidateProduce(t *testing.T) {
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "v", 2, nil)
	if _, err := ts.ensureOffsetsTopic(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if err := ts.reconcile(ts.meta.Image()); err != nil {
		t.Fatal(err)
	}
	txnID := "tx"
	plain := func() []byte { return batchOf(t, -1, -1, 0, protocol.CodecNone, "a", "b") }
	txnal := func(pid int64) []byte {
		return batchOf(t, pid, 0, protocol.AttrTransactional, protocol.CodecNone, "t")
	}
	magic1 := plain()
	magic1[16] = 1 // the magic byte
	watched := []tp{{"v", 0}, {"v", 1}, {offsetsTopic, 0}}

	for _, row := range []struct {
		name     string
		req      *kmsg.ProduceRequest
		want     map[string]int16 // partition → error code
		appended []tp             // partitions that may grow
		v0grow   int64            // when set, by how much v-0 grows
	}{
		{
			name: "acks=2 appends nothing",
			req:  produceRequest(9, 2, nil, producePart{tp{"v", 0}, plain()}, producePart{tp{"v", 1}, plain()}),
			want: map[string]int16{"v-0": kerr.InvalidRequiredAcks.Code, "v-1": kerr.InvalidRequiredAcks.Code},
		},
		{
			name: "acks=-2",
			req:  produceRequest(3, -2, nil, producePart{tp{"v", 0}, plain()}),
			want: map[string]int16{"v-0": kerr.InvalidRequiredAcks.Code},
		},
		{
			name: "acks=2 answers an unknown partition as unknown",
			req:  produceRequest(9, 2, nil, producePart{tp{"v", 0}, plain()}, producePart{tp{"v", 7}, plain()}, producePart{tp{"nope", 0}, plain()}),
			want: map[string]int16{"v-0": kerr.InvalidRequiredAcks.Code, "v-7": kerr.UnknownTopicOrPartition.Code, "nope-0": kerr.UnknownTopicOrPartition.Code},
		},
		{
			name: "negative partition",
			req:  produceRequest(9, 1, nil, producePart{tp{"v", -1}, plain()}, producePart{tp{"v", 1}, plain()}),
			want: map[string]int16{"v--1": kerr.UnknownTopicOrPartition.Code, "v-1": 0},
			// The valid partition of the request still appends.
			appended: []tp{{"v", 1}},
		},
		{
			name: "transactional batch without a transactional id fails the whole request",
			req:  produceRequest(9, -1, nil, producePart{tp{"v", 0}, txnal(1000)}, producePart{tp{"v", 1}, plain()}),
			want: map[string]int16{"v-0": kerr.TransactionalIDAuthorizationFailed.Code, "v-1": kerr.TransactionalIDAuthorizationFailed.Code},
		},
		{
			name:     "transactional id with plain batches is accepted",
			req:      produceRequest(9, 1, &txnID, producePart{tp{"v", 0}, plain()}),
			want:     map[string]int16{"v-0": 0},
			appended: []tp{{"v", 0}},
		},
		{
			name: "transactional batches of two producers",
			req:  produceRequest(9, -1, &txnID, producePart{tp{"v", 0}, txnal(1000)}, producePart{tp{"v", 1}, txnal(1001)}),
			want: map[string]int16{"v-0": kerr.InvalidProducerIDMapping.Code, "v-1": kerr.InvalidProducerIDMapping.Code},
		},
		{
			name: "empty records",
			req:  produceRequest(9, 1, nil, producePart{tp{"v", 0}, []byte{}}),
			want: map[string]int16{"v-0": kerr.InvalidRecord.Code},
		},
		{
			name: "null records",
			req:  produceRequest(9, 1, nil, producePart{tp{"v", 0}, nil}),
			want: map[string]int16{"v-0": kerr.InvalidRecord.Code},
		},
		{
			name: "two batches in one partition",
			req:  produceRequest(9, 1, nil, producePart{tp{"v", 0}, append(plain(), plain()...)}),
			want: map[string]int16{"v-0": kerr.InvalidRecord.Code},
		},
		{
			name: "magic 1 batch",
			req:  produceRequest(9, 1, nil, producePart{tp{"v", 0}, magic1}),
			want: map[string]int16{"v-0": kerr.InvalidRecord.Code},
		},
		{
			name: "zstd before v7",
			req:  produceRequest(6, 1, nil, producePart{tp{"v", 0}, batchOf(t, -1, -1, 0, protocol.CodecZstd, "z")}),
			want: map[string]int16{"v-0": kerr.UnsupportedCompressionType.Code},
		},
		{
			name:     "zstd from v7",
			req:      produceRequest(7, 1, nil, producePart{tp{"v", 1}, batchOf(t, -1, -1, 0, protocol.CodecZstd, "z")}),
			want:     map[string]int16{"v-1": 0},
			appended: []tp{{"v", 1}},
		},
		{
			name: "a partition named twice: only the last copy is appended and answered",
			req: produceRequest(9, 1, nil, producePart{tp{"v", 0}, plain()}, producePart{tp{"v", 1}, plain()},
				producePart{tp{"v", 0}, batchOf(t, -1, -1, 0, protocol.CodecNone, "x", "y", "z")}),
			want:     map[string]int16{"v-0": 0, "v-1": 0},
			appended: []tp{{"v", 0}, {"v", 1}},
			v0grow:   3,
		},
		{
			name: "internal topic from a client",
			req:  produceRequest(9, 1, nil, producePart{tp{offsetsTopic, 0}, plain()}),
			want: map[string]int16{offsetsTopic + "-0": kerr.InvalidTopicException.Code},
		},
	} {
		t.Run(row.name, func(t *testing.T) {
			before := make(map[tp]int64)
			for _, p := range watched {
				before[p] = logEnd(t, ts, p.topic, p.partition)
			}
			c := dialRaw(t, ts.addr)
			resp := exchange(t, c, row.req).(*kmsg.ProduceResponse)
			got := make(map[string]int16)
			answers := 0
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					got[tp{rt.Topic, rp.Partition}.String()] = rp.ErrorCode
					answers++
					if rp.ErrorCode != 0 && rp.BaseOffset != -1 {
						t.Errorf("%s-%d: error %d with base offset %d", rt.Topic, rp.Partition, rp.ErrorCode, rp.BaseOffset)
					}
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(row.want) || answers != len(row.want) {
				t.Fatalf("%d answers, error codes %v, want %v", answers, got, row.want)
			}
			if grew := logEnd(t, ts, "v", 0) - before[tp{"v", 0}]; row.v0grow != 0 && grew != row.v0grow {
				t.Errorf("v-0 grew by %d records, want %d", grew, row.v0grow)
			}
			for _, p := range watched {
				after := logEnd(t, ts, p.topic, p.partition)
				if grew := after != before[p]; grew != slices.Contains(row.appended, p) {
					t.Errorf("%s: log end %d → %d", p, before[p], after)
				}
			}
		})
	}
}

// listOffsetsPart is one partition of a ListOffsets row.
type listOffsetsPart struct {
	tp
	timestamp int64
}

func listOffsetsRequest(version int16, isolation int8, parts ...listOffsetsPart) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(version)
	req.ReplicaID = -1
	req.IsolationLevel = isolation
	for _, p := range parts {
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = p.topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = p.partition
		rp.Timestamp = p.timestamp
		rp.CurrentLeaderEpoch = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// TestValidateListOffsets mirrors ListOffsetsRequest.duplicatePartitions,
// ReplicaManager.fetchOffset (isListOffsetsTimestampUnsupported) and
// IsolationLevel.forId.
func TestValidateListOffsets(t *testing.T) {
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "lo", 2, nil)
	c := dialRaw(t, ts.addr)
	for _, row := range []struct {
		name string
		req  *kmsg.ListOffsetsRequest
		want string // the answers in order: topic-partition:code offset
	}{
		{
			name: "a partition named twice answers once, INVALID_REQUEST",
			req:  listOffsetsRequest(7, 0, listOffsetsPart{tp{"lo", 0}, -1}, listOffsetsPart{tp{"lo", 1}, -1}, listOffsetsPart{tp{"lo", 0}, -2}),
			want: "lo-0:42/-1 lo-1:0/0",
		},
		{
			name: "max timestamp before v7",
			req:  listOffsetsRequest(6, 0, listOffsetsPart{tp{"lo", 0}, -3}),
			want: "lo-0:35/-1",
		},
		{
			name: "max timestamp from v7",
			req:  listOffsetsRequest(7, 0, listOffsetsPart{tp{"lo", 0}, -3}),
			want: "lo-0:0/-1",
		},
		{
			name: "earliest local before v8",
			req:  listOffsetsRequest(7, 0, listOffsetsPart{tp{"lo", 0}, -4}),
			want: "lo-0:35/-1",
		},
		{
			name: "latest tiered before v9",
			req:  listOffsetsRequest(8, 0, listOffsetsPart{tp{"lo", 0}, -5}),
			want: "lo-0:35/-1",
		},
		{
			name: "unknown negative timestamp",
			req:  listOffsetsRequest(9, 0, listOffsetsPart{tp{"lo", 0}, -7}, listOffsetsPart{tp{"lo", 1}, -2}),
			want: "lo-0:35/-1 lo-1:0/0",
		},
		{
			name: "unsupported timestamp on an unknown partition",
			req:  listOffsetsRequest(6, 0, listOffsetsPart{tp{"nope", 0}, -3}),
			want: "nope-0:35/-1",
		},
		{
			name: "negative partition",
			req:  listOffsetsRequest(7, 0, listOffsetsPart{tp{"lo", -1}, -1}),
			want: "lo--1:3/-1",
		},
		{
			name: "isolation level 2 fails every partition",
			req:  listOffsetsRequest(7, 2, listOffsetsPart{tp{"lo", 0}, -1}, listOffsetsPart{tp{"lo", 1}, -1}),
			want: "lo-0:-1/-1 lo-1:-1/-1",
		},
	} {
		t.Run(row.name, func(t *testing.T) {
			resp := exchange(t, c, row.req).(*kmsg.ListOffsetsResponse)
			var got []string
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					got = append(got, fmt.Sprintf("%s-%d:%d/%d", rt.Topic, rp.Partition, rp.ErrorCode, rp.Offset))
				}
			}
			if g := fmt.Sprint(got); g != "["+row.want+"]" {
				t.Fatalf("answers %s, want [%s]", g, row.want)
			}
		})
	}
}

// configRes is one resource of a config row: type, name and its changes
// (name=value, a nil value for null, and for incremental rows the
// operation).
type configRes struct {
	typ  kmsg.ConfigResourceType
	name string
	ops  []configChange
}

type configChange struct {
	name  string
	op    kmsg.IncrementalAlterConfigOp
	value *string
}

func set(name, value string) configChange { return configChange{name, 0, &value} }

func incrementalRequest(res ...configRes) *kmsg.IncrementalAlterConfigsRequest {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.SetVersion(1)
	for _, r := range res {
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = r.typ, r.name
		for _, o := range r.ops {
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Op, c.Value = o.name, o.op, o.value
			rr.Configs = append(rr.Configs, c)
		}
		req.Resources = append(req.Resources, rr)
	}
	return req
}

func legacyAlterRequest(res ...configRes) *kmsg.AlterConfigsRequest {
	req := kmsg.NewPtrAlterConfigsRequest()
	req.SetVersion(2)
	for _, r := range res {
		rr := kmsg.NewAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = r.typ, r.name
		for _, o := range r.ops {
			c := kmsg.NewAlterConfigsRequestResourceConfig()
			c.Name, c.Value = o.name, o.value
			rr.Configs = append(rr.Configs, c)
		}
		req.Resources = append(req.Resources, rr)
	}
	return req
}

// TestValidateAlterConfigs mirrors ConfigAdminManager.preprocess (both
// forms), ControllerConfigurationValidator and ConfigurationControlManager:
// each row's answers in request order, and the topic's overrides after it.
func TestValidateAlterConfigs(t *testing.T) {
	ts := startServer(t, "")
	adm := ts.admin(t)
	createTopic(t, adm, "cfg", 1, map[string]*string{"retention.ms": strp("600000")})
	createTopic(t, adm, "cfg2", 1, nil)
	c := dialRaw(t, ts.addr)
	const topic, broker, logger = kmsg.ConfigResourceTypeTopic, kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger
	overrides := func(name string) string {
		tc, _ := ts.meta.Image().Topic(name)
		return fmt.Sprint(tc.Configs)
	}
	unchanged := "map[retention.ms:600000]"
	for _, row := range []struct {
		name  string
		req   kmsg.Request
		want  []int16
		after string // cfg's overrides after the row
		cfg2  string // cfg2's overrides after the row
	}{
		{
			name: "a resource named twice fails both copies; the others apply",
			req: incrementalRequest(
				configRes{topic, "cfg", []configChange{set("retention.ms", "1000")}},
				configRes{topic, "cfg2", []configChange{set("retention.ms", "2000")}},
				configRes{topic, "cfg", []configChange{set("retention.ms", "3000")}}),
			want:  []int16{kerr.InvalidRequest.Code, 0, kerr.InvalidRequest.Code},
			after: unchanged, cfg2: "map[retention.ms:2000]",
		},
		{
			name:  "a config named twice",
			req:   incrementalRequest(configRes{topic, "cfg", []configChange{set("retention.ms", "1000"), set("retention.ms", "1000")}}),
			want:  []int16{kerr.InvalidRequest.Code},
			after: unchanged,
		},
		{
			name:  "a null value is refused before the unknown name",
			req:   incrementalRequest(configRes{topic, "cfg", []configChange{set("retention.ms", "1000"), {"no.such.config", 0, nil}}}),
			want:  []int16{kerr.InvalidRequest.Code},
			after: unchanged,
		},
		{
			name:  "a null value to APPEND",
			req:   incrementalRequest(configRes{topic, "cfg", []configChange{{"cleanup.policy", 2, nil}}}),
			want:  []int16{kerr.InvalidRequest.Code},
			after: unchanged,
		},
		{
			name:  "a null value to DELETE is fine",
			req:   incrementalRequest(configRes{topic, "cfg", []configChange{{"retention.ms", 1, nil}}}),
			want:  []int16{0},
			after: "map[]",
		},
		{
			name:  "an unknown resource type",
			req:   incrementalRequest(configRes{99, "cfg", []configChange{set("retention.ms", "1000")}}),
			want:  []int16{kerr.InvalidRequest.Code},
			after: "map[]",
		},
		{
			name:  "the empty topic name",
			req:   incrementalRequest(configRes{topic, "", []configChange{set("retention.ms", "1000")}}),
			want:  []int16{kerr.InvalidRequest.Code},
			after: "map[]",
		},
		{
			name:  "an illegal topic name",
			req:   incrementalRequest(configRes{topic, "no/such", []configChange{set("retention.ms", "1000")}}),
			want:  []int16{kerr.InvalidTopicException.Code},
			after: "map[]",
		},
		{
			name:  "an unknown topic with an unknown config answers the config",
			req:   incrementalRequest(configRes{topic, "nope", []configChange{set("no.such.config", "1")}}),
			want:  []int16{kerr.InvalidConfig.Code},
			after: "map[]",
		},
		{
			name:  "an unknown topic",
			req:   incrementalRequest(configRes{topic, "nope", []configChange{set("retention.ms", "1")}}),
			want:  []int16{kerr.UnknownTopicOrPartition.Code},
			after: "map[]",
		},
		{
			name:  "APPEND to a config that is not a list",
			req:   incrementalRequest(configRes{topic, "cfg", []configChange{{"retention.ms", 2, strp("5")}}}),
			want:  []int16{kerr.InvalidConfig.Code},
			after: "map[]",
		},
		{
			name:  "another broker's id",
			req:   incrementalRequest(configRes{broker, "x", []configChange{set("log.retention.ms", "1")}}, configRes{broker, "77", nil}),
			want:  []int16{kerr.InvalidRequest.Code, kerr.InvalidRequest.Code},
			after: "map[]",
		},
		{
			name: "legacy: a resource named twice",
			req: legacyAlterRequest(
				configRes{topic, "cfg", []configChange{set("retention.ms", "1000")}},
				configRes{topic, "cfg", []configChange{set("retention.ms", "2000")}}),
			want:  []int16{kerr.InvalidRequest.Code, kerr.InvalidRequest.Code},
			after: "map[]",
		},
		{
			name:  "legacy: a null value",
			req:   legacyAlterRequest(configRes{topic, "cfg", []configChange{{"retention.ms", 0, nil}}}),
			want:  []int16{kerr.InvalidRequest.Code},
			after: "map[]",
		},
		{
			name:  "legacy: broker loggers are an unknown type",
			req:   legacyAlterRequest(configRes{logger, "1", []configChange{set("root", "DEBUG")}}),
			want:  []int16{kerr.InvalidRequest.Code},
			after: "map[]",
		},
		{
			name:  "legacy: a valid change replaces the overrides",
			req:   legacyAlterRequest(configRes{topic, "cfg", []configChange{set("retention.ms", "7000")}}),
			want:  []int16{0},
			after: "map[retention.ms:7000]",
		},
	} {
		t.Run(row.name, func(t *testing.T) {
			var got []int16
			switch resp := exchange(t, c, row.req).(type) {
			case *kmsg.IncrementalAlterConfigsResponse:
				for _, r := range resp.Resources {
					got = append(got, r.ErrorCode)
				}
			case *kmsg.AlterConfigsResponse:
				for _, r := range resp.Resources {
					got = append(got, r.ErrorCode)
				}
			}
			if !slices.Equal(got, row.want) {
				t.Fatalf("error codes %v, want %v", got, row.want)
			}
			if got := overrides("cfg"); got != row.after {
				t.Errorf("cfg overrides %s, want %s", got, row.after)
			}
			if row.cfg2 != "" {
				if got := overrides("cfg2"); got != row.cfg2 {
					t.Errorf("cfg2 overrides %s, want %s", got, row.cfg2)
				}
			}
		})
	}
}

// TestValidateDescribeConfigs mirrors ConfigHelper.handleDescribeConfigsRequest
// and describeConfigs.
func TestValidateDescribeConfigs(t *testing.T) {
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "dc", 1, nil)
	c := dialRaw(t, ts.addr)
	describe := func(names []string, res ...configRes) []string {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.SetVersion(4)
		for _, r := range res {
			rr := kmsg.NewDescribeConfigsRequestResource()
			rr.ResourceType, rr.ResourceName, rr.ConfigNames = r.typ, r.name, names
			req.Resources = append(req.Resources, rr)
		}
		var out []string
		for _, r := range exchange(t, c, req).(*kmsg.DescribeConfigsResponse).Resources {
			n := fmt.Sprint(len(r.Configs))
			if len(r.Configs) > 10 {
				n = "many"
			}
			out = append(out, fmt.Sprintf("%d/%s", r.ErrorCode, n))
		}
		return out
	}
	const topic, broker = kmsg.ConfigResourceTypeTopic, kmsg.ConfigResourceTypeBroker
	for _, row := range []struct {
		name  string
		names []string
		res   []configRes
		want  string // each resource's error code/number of configs
	}{
		{"an unknown resource type fails every resource", nil, []configRes{{topic, "dc", nil}, {99, "x", nil}}, "[42/0 42/0]"},
		{"the empty topic name", nil, []configRes{{topic, "", nil}}, "[17/0]"},
		{"an illegal topic name", nil, []configRes{{topic, "a b", nil}, {topic, "dc", nil}}, "[17/0 0/many]"},
		{"an unknown topic", nil, []configRes{{topic, "nope", nil}}, "[3/0]"},
		{"an empty list of names asks for all", []string{}, []configRes{{topic, "dc", nil}}, "[0/many]"},
		{"named configs", []string{"retention.ms", "no.such"}, []configRes{{topic, "dc", nil}}, "[0/1]"},
		{"cluster-wide broker defaults: none are dynamic", nil, []configRes{{broker, "", nil}}, "[0/0]"},
		{"this broker", nil, []configRes{{broker, "1", nil}}, "[0/many]"},
		{"another broker, or no broker id", nil, []configRes{{broker, "77", nil}, {broker, "x", nil}}, "[42/0 42/0]"},
		{"broker loggers without an id", nil, []configRes{{kmsg.ConfigResourceTypeBrokerLogger, "", nil}}, "[42/0]"},
		{"client metrics", nil, []configRes{{16, "", nil}, {16, "sub", nil}}, "[42/0 0/0]"},
		{"a group without a name", nil, []configRes{{32, "", nil}}, "[42/0]"},
	} {
		t.Run(row.name, func(t *testing.T) {
			if got := fmt.Sprint(describe(row.names, row.res...)); got != row.want {
				t.Fatalf("answers %s, want %s", got, row.want)
			}
		})
	}
}

// logStart is the log start offset of a partition this broker hosts.
func logStart(t *testing.T, ts *testServer, p tp) int64 {
	t.Helper()
	part := ts.parts.get(p.topic, p.partition)
	if part == nil {
		t.Fatalf("%s not hosted", p)
	}
	return part.Log.LogStartOffset()
}

// TestValidateDeleteRecords mirrors KafkaApis.handleDeleteRecordsRequest,
// ReplicaManager.deleteRecordsOnLocalLog and Partition.deleteRecordsOnLeader.
func TestValidateDeleteRecords(t *testing.T) {
	ts := startServer(t, "")
	adm := ts.admin(t)
	createTopic(t, adm, "dr", 2, nil)
	createTopic(t, adm, "drc", 1, map[string]*string{"cleanup.policy": strp("compact")})
	if _, err := ts.ensureOffsetsTopic(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if err := ts.reconcile(ts.meta.Image()); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, ts.addr)
	five := batchOf(t, -1, -1, 0, protocol.CodecNone, "a", "b", "c", "d", "e")
	if r := produceRaw(t, c, "dr", five); r.ErrorCode != 0 { // to dr-0
		t.Fatalf("produce: %d", r.ErrorCode)
	}
	kcl := ts.client(t)
	for i := range 5 {
		rec := &kgo.Record{Topic: "drc", Key: []byte{byte(i)}, Value: []byte("v")}
		if err := kcl.ProduceSync(testContext(t), rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	watched := []tp{{"dr", 0}, {"drc", 0}, {offsetsTopic, 0}}
	type del struct {
		tp
		offset int64
	}
	for _, row := range []struct {
		name  string
		dels  []del
		want  string // answers: partition:code/low watermark
		start string // log start offsets of the watched partitions after
	}{
		{"a partition named twice is answered once, for the last offset", []del{{tp{"dr", 0}, 1}, {tp{"dr", 0}, 3}}, "[dr-0:0/3]", "[3 0 0]"},
		{"a negative offset", []del{{tp{"dr", 0}, -2}}, "[dr-0:1/-1]", "[3 0 0]"},
		{"an offset past the high watermark", []del{{tp{"dr", 0}, 6}}, "[dr-0:1/-1]", "[3 0 0]"},
		{"a compacted topic", []del{{tp{"drc", 0}, 2}}, "[drc-0:44/-1]", "[3 0 0]"},
		{"an internal topic", []del{{tp{offsetsTopic, 0}, -1}}, "[__consumer_offsets-0:17/-1]", "[3 0 0]"},
		{"unknown and negative partitions", []del{{tp{"dr", 9}, 1}, {tp{"dr", -1}, 1}, {tp{"nope", 0}, 1}}, "[dr-9:3/-1 dr--1:3/-1 nope-0:3/-1]", "[3 0 0]"},
	} {
		t.Run(row.name, func(t *testing.T) {
			req := kmsg.NewPtrDeleteRecordsRequest()
			req.SetVersion(2)
			req.TimeoutMillis = 5000
			for _, d := range row.dels {
				rt := kmsg.NewDeleteRecordsRequestTopic()
				rt.Topic = d.topic
				rp := kmsg.NewDeleteRecordsRequestTopicPartition()
				rp.Partition, rp.Offset = d.partition, d.offset
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
			}
			var got []string
			for _, rt := range exchange(t, c, req).(*kmsg.DeleteRecordsResponse).Topics {
				for _, rp := range rt.Partitions {
					got = append(got, fmt.Sprintf("%s-%d:%d/%d", rt.Topic, rp.Partition, rp.ErrorCode, rp.LowWatermark))
				}
			}
			if fmt.Sprint(got) != row.want {
				t.Fatalf("answers %v, want %s", got, row.want)
			}
			var starts []int64
			for _, p := range watched {
				starts = append(starts, logStart(t, ts, p))
			}
			if fmt.Sprint(starts) != row.start {
				t.Errorf("log start offsets %v, want %s", starts, row.start)
			}
		})
	}
}

// TestValidateMetadata mirrors KafkaApis.handleTopicMetadataRequest and
// getTopicMetadata: ids only from v12 (and then names are ignored), each
// topic answered once, illegal names never created.
func TestValidateMetadata(t *testing.T) {
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "md", 1, nil)
	id := topicID(t, ts, "md")
	c := dialRaw(t, ts.addr)
	name := func(s string) *string { return &s }
	metadata := func(version int16, autoCreate bool, topics ...kmsg.MetadataRequestTopic) string {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(version)
		req.AllowAutoTopicCreation = autoCreate
		req.Topics = topics
		resp := exchange(t, c, req).(*kmsg.MetadataResponse)
		out := fmt.Sprintf("brokers=%d", len(resp.Brokers))
		for _, mt := range resp.Topics {
			n := "<null>"
			if mt.Topic != nil {
				n = *mt.Topic
			}
			out += fmt.Sprintf(" %s:%d/%d", n, mt.ErrorCode, len(mt.Partitions))
		}
		return out
	}
	unknown := [16]byte{1, 2, 3}
	for _, row := range []struct {
		name    string
		version int16
		create  bool
		topics  []kmsg.MetadataRequestTopic
		want    string
	}{
		{"a topic id before v12 fails the request", 11, true, []kmsg.MetadataRequestTopic{{Topic: name("md")}, {Topic: name("md"), TopicID: id}}, "brokers=0 md:42/0 md:42/0"},
		{"a null name before v12", 10, true, []kmsg.MetadataRequestTopic{{}}, "brokers=0 :42/0"},
		{"a topic named twice is answered once", 12, false, []kmsg.MetadataRequestTopic{{Topic: name("md")}, {Topic: name("md")}}, "brokers=1 md:0/1"},
		{"ids, and then names are ignored", 12, false, []kmsg.MetadataRequestTopic{{TopicID: id}, {TopicID: unknown}, {TopicID: id}, {Topic: name("other")}}, "brokers=1 md:0/1 <null>:100/0"},
		{"an illegal name is not created", 1, true, []kmsg.MetadataRequestTopic{{Topic: name("a b")}}, "brokers=1 a b:17/0"},
		{"no auto-creation when not allowed", 9, false, []kmsg.MetadataRequestTopic{{Topic: name("absent")}}, "brokers=1 absent:3/0"},
	} {
		t.Run(row.name, func(t *testing.T) {
			if got := metadata(row.version, row.create, row.topics...); got != row.want {
				t.Fatalf("got %q, want %q", got, row.want)
			}
		})
	}
	img := ts.meta.Image()
	for _, n := range []string{"a b", "absent", "other"} {
		if _, ok := img.Topic(n); ok {
			t.Errorf("topic %q was created", n)
		}
	}
}

// TestValidateAdminRequests covers the smaller checks, one row per API:
// DescribeCluster's endpoint type (AuthHelper.computeDescribeClusterResponse),
// ElectLeaders' election type (ReplicationControlManager.electionType),
// DescribeQuorum's partition (KafkaRaftClient.handleDescribeQuorumRequest),
// DescribeProducers' topic names (KafkaApis.checkValidTopic),
// CreatePartitions' duplicate topics (ControllerApis.createPartitions),
// AlterPartitionReassignments' partitions and replicas
// (ReplicationControlManager.alterPartitionReassignment), and negative
// timeouts: a deadline already past when Kafka's controller would run
// the request (KafkaEventQueue).
func TestValidateAdminRequests(t *testing.T) {
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "adm", 1, nil)
	c := dialRaw(t, ts.addr)
	partitions := func() int {
		tc, _ := ts.meta.Image().Topic("adm")
		return len(tc.Partitions)
	}

	describeCluster := func(version int16, endpoint int8) string {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.SetVersion(version)
		req.EndpointType = endpoint
		resp := exchange(t, c, req).(*kmsg.DescribeClusterResponse)
		return fmt.Sprintf("%d/%d", resp.ErrorCode, len(resp.Brokers))
	}
	electLeaders := func(typ int8, timeout int32) string {
		req := kmsg.NewPtrElectLeadersRequest()
		req.SetVersion(2)
		req.ElectionType = typ
		req.TimeoutMillis = timeout
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic, rt.Partitions = "adm", []int32{0}
		req.Topics = append(req.Topics, rt)
		resp := exchange(t, c, req).(*kmsg.ElectLeadersResponse)
		out := fmt.Sprint(resp.ErrorCode)
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				out += fmt.Sprintf(" %s-%d:%d", rt.Topic, rp.Partition, rp.ErrorCode)
			}
		}
		return out
	}
	describeQuorum := func(topic string, parts ...int32) string {
		req := kmsg.NewPtrDescribeQuorumRequest()
		req.SetVersion(1)
		rt := kmsg.NewDescribeQuorumRequestTopic()
		rt.Topic = topic
		for _, p := range parts {
			rp := kmsg.NewDescribeQuorumRequestTopicPartition()
			rp.Partition = p
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		var out []string
		for _, st := range exchange(t, c, req).(*kmsg.DescribeQuorumResponse).Topics {
			for _, sp := range st.Partitions {
				out = append(out, fmt.Sprintf("%s-%d:%d/leader %d", st.Topic, sp.Partition, sp.ErrorCode, sp.LeaderID))
			}
		}
		return fmt.Sprint(out)
	}
	describeProducers := func(topic string) string {
		req := kmsg.NewPtrDescribeProducersRequest()
		rt := kmsg.NewDescribeProducersRequestTopic()
		rt.Topic, rt.Partitions = topic, []int32{0, 1}
		req.Topics = append(req.Topics, rt)
		var out []string
		for _, st := range exchange(t, c, req).(*kmsg.DescribeProducersResponse).Topics {
			for _, sp := range st.Partitions {
				out = append(out, fmt.Sprintf("%d:%d", sp.Partition, sp.ErrorCode))
			}
		}
		return fmt.Sprint(out)
	}
	createPartitions := func(timeout int32, topics ...string) string {
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.SetVersion(3)
		req.TimeoutMillis = timeout
		for _, n := range topics {
			rt := kmsg.NewCreatePartitionsRequestTopic()
			rt.Topic, rt.Count = n, 3
			req.Topics = append(req.Topics, rt)
		}
		var out []string
		for _, st := range exchange(t, c, req).(*kmsg.CreatePartitionsResponse).Topics {
			out = append(out, fmt.Sprintf("%s:%d", st.Topic, st.ErrorCode))
		}
		return fmt.Sprint(out)
	}

	type reassignPart struct {
		tp
		replicas []int32
	}
	reassign := func(timeout int32, parts ...reassignPart) string {
		req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		req.TimeoutMillis = timeout
		for _, p := range parts {
			rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
			rt.Topic = p.topic
			rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
			rp.Partition, rp.Replicas = p.partition, p.replicas
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		resp := exchange(t, c, req).(*kmsg.AlterPartitionAssignmentsResponse)
		out := fmt.Sprint(resp.ErrorCode)
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				out += fmt.Sprintf(" %s-%d:%d", rt.Topic, rp.Partition, rp.ErrorCode)
			}
		}
		return out
	}

	for _, row := range []struct {
		name string
		got  func() string
		want string
	}{
		{"DescribeCluster: brokers", func() string { return describeCluster(1, 1) }, "0/1"},
		{"DescribeCluster: controllers, from a broker", func() string { return describeCluster(1, 2) }, "114/0"},
		{"DescribeCluster: an unknown endpoint type", func() string { return describeCluster(1, 9) }, "115/0"},
		{"DescribeCluster v0 carries no endpoint type: brokers", func() string { return describeCluster(0, 9) }, "0/1"},
		{"ElectLeaders: an unknown election type", func() string { return electLeaders(5, 5000) }, "42 adm-0:42"},
		{"ElectLeaders: preferred, not needed", func() string { return electLeaders(0, 5000) }, "0 adm-0:84"},
		{"ElectLeaders: a negative timeout, before the type", func() string { return electLeaders(5, -1) }, "7 adm-0:7"},
		{"DescribeQuorum: the metadata partition", func() string { return describeQuorum("__cluster_metadata", 0) }, "[__cluster_metadata-0:0/leader 1]"},
		{"DescribeQuorum: another partition", func() string { return describeQuorum("__cluster_metadata", 1) }, "[__cluster_metadata-1:3/leader 0]"},
		{"DescribeQuorum: two partitions", func() string { return describeQuorum("__cluster_metadata", 0, 0) }, "[__cluster_metadata-0:3/leader 0 __cluster_metadata-0:3/leader 0]"},
		{"DescribeQuorum: another topic", func() string { return describeQuorum("adm", 0) }, "[adm-0:3/leader 0]"},
		{"DescribeProducers: an illegal topic name", func() string { return describeProducers("a/b") }, "[0:17 1:17]"},
		{"DescribeProducers: a legal one", func() string { return describeProducers("adm") }, "[0:0 1:3]"},
		{"CreatePartitions: a topic named twice is answered once and not grown", func() string { return createPartitions(5000, "adm", "nope", "adm") }, "[adm:42 nope:3]"},
		{"CreatePartitions: a negative timeout", func() string { return createPartitions(-1, "adm") }, "[adm:7]"},
		{"AlterPartitionReassignments: a negative timeout", func() string { return reassign(-1, reassignPart{tp{"adm", 0}, []int32{1}}) }, "7 adm-0:7"},
		{"AlterPartitionReassignments: unknown partitions", func() string {
			return reassign(5000, reassignPart{tp{"adm", 3}, []int32{1}}, reassignPart{tp{"adm", -1}, []int32{1}}, reassignPart{tp{"nope", 0}, []int32{1}})
		}, "0 adm-3:3 adm--1:3 nope-0:3"},
		{"AlterPartitionReassignments: bad replica lists", func() string {
			return reassign(5000, reassignPart{tp{"adm", 0}, []int32{}}, reassignPart{tp{"adm", 0}, []int32{1, 1}}, reassignPart{tp{"adm", 0}, []int32{7}})
		}, "0 adm-0:39 adm-0:39 adm-0:39"},
		{"AlterPartitionReassignments: cancelling none in progress", func() string { return reassign(5000, reassignPart{tp{"adm", 0}, nil}) }, "0 adm-0:85"},
	} {
		t.Run(row.name, func(t *testing.T) {
			if got := row.got(); got != row.want {
				t.Fatalf("got %s, want %s", got, row.want)
			}
			if n := partitions(); n != 1 {
				t.Fatalf("adm has %d partitions", n)
			}
			if tc, _ := ts.meta.Image().Topic("adm"); fmt.Sprint(tc.Partitions[0].Replicas) != "[1]" {
				t.Fatalf("adm-0 replicas %v", tc.Partitions[0].Replicas)
			}
		})
	}
}

// TestValidateOffsetForLeaderEpoch mirrors ReplicaManager.lastOffsetForLeaderEpoch,
// Partition.lastOffsetForLeaderEpoch (the current leader epoch fences) and
// LeaderEpochFileCache.endOffsetFor.
func TestValidateOffsetForLeaderEpoch(t *testing.T) {
	ts := startServer(t, "")
	createTopic(t, ts.admin(t), "oe", 1, nil)
	c := dialRaw(t, ts.addr)
	if r := produceRaw(t, c, "oe", batchOf(t, -1, -1, 0, protocol.CodecNone, "a", "b", "c", "d", "e")); r.ErrorCode != 0 {
		t.Fatalf("produce: %d", r.ErrorCode)
	}
	ask := func(partition, current, epoch int32) string {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.SetVersion(4)
		req.ReplicaID = -1
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = "oe"
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = partition, current, epoch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		sp := exchange(t, c, req).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
		return fmt.Sprintf("%d %d/%d", sp.ErrorCode, sp.LeaderEpoch, sp.EndOffset)
	}
	for _, row := range []struct {
		name                      string
		partition, current, epoch int32
		want                      string
	}{
		{"the current epoch: the log end", 0, -1, 0, "0 0/5"},
		{"the undefined epoch", 0, -1, -1, "0 -1/-1"},
		{"older than every epoch: itself and where the first began", 0, -1, -2, "0 -2/0"},
		{"a current epoch ahead of the leader's", 0, 5, 0, "75 -1/-1"},
		{"a negative partition", -1, -1, 0, "3 -1/-1"},
		{"an unknown partition", 9, -1, 0, "3 -1/-1"},
	} {
		t.Run(row.name, func(t *testing.T) {
			if got := ask(row.partition, row.current, row.epoch); got != row.want {
				t.Fatalf("got %s, want %s", got, row.want)
			}
		})
	}
}
