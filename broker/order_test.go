package broker

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/protocol"
)

// Kafka serves a connection's requests one at a time, in the order sent,
// and clients rely on it (async offset commits, a config change read back
// on the same connection). Gregor pipelines a connection's requests; these
// tests send hundreds of requests on one connection without waiting and
// check that their effects happened in the order sent.

// pipeline writes every request on one connection before reading any
// response, and returns the responses in request order.
func pipeline(t *testing.T, addr string, reqs []kmsg.Request) []kmsg.Response {
	t.Helper()
	c := dialRaw(t, addr)
	c.nc.SetDeadline(time.Now().Add(60 * time.Second))
	var out []byte
	for i, r := range reqs {
		out = append(out, encodeRequest(r, int32(i))...)
	}
	// Written from a goroutine: the broker answers while we still write,
	// and a full socket buffer each way would otherwise deadlock.
	werr := make(chan error, 1)
	go func() {
		_, err := c.nc.Write(out)
		werr <- err
	}()
	resps := make([]kmsg.Response, len(reqs))
	for i, r := range reqs {
		frame, err := protocol.ReadFrame(c.nc, 1<<30, nil)
		if err != nil {
			t.Fatalf("response %d of %d (%s): %v", i, len(reqs), kmsg.NameForKey(r.Key()), err)
		}
		if got := int32(binary.BigEndian.Uint32(frame)); got != int32(i) {
			t.Fatalf("response %d has correlation id %d", i, got)
		}
		body := frame[4:]
		if r.IsFlexible() && r.Key() != apiKeyApiVersions {
			body = body[1:] // the response header's empty tag buffer
		}
		resp := r.ResponseKind()
		resp.SetVersion(r.GetVersion())
		if err := resp.ReadFrom(body); err != nil {
			t.Fatalf("decode response %d (%s): %v", i, kmsg.NameForKey(r.Key()), err)
		}
		resps[i] = resp
	}
	if err := <-werr; err != nil {
		t.Fatalf("write pipelined requests: %v", err)
	}
	return resps
}

func commitRequest(group, topic string, partition int32, offset int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 8
	req.Group = group
	req.Generation = -1
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = topic
	p := kmsg.NewOffsetCommitRequestTopicPartition()
	p.Partition, p.Offset = partition, offset
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return req
}

func offsetFetchRequest(group, topic string, partition int32) *kmsg.OffsetFetchRequest {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 7
	req.Group = group
	t := kmsg.NewOffsetFetchRequestTopic()
	t.Topic = topic
	t.Partitions = []int32{partition}
	req.Topics = append(req.Topics, t)
	return req
}

// fetchedOffset is the one offset an offsetFetchRequest answer carries.
func fetchedOffset(t *testing.T, resp kmsg.Response) int64 {
	t.Helper()
	r := resp.(*kmsg.OffsetFetchResponse)
	if r.ErrorCode != 0 || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("offset fetch answered %+v", r)
	}
	return r.Topics[0].Partitions[0].Offset
}

// readyGroupCoordinator commits once through kadm, which retries until
// the group's coordinator is loaded, so that raw requests find it ready.
func readyGroupCoordinator(t *testing.T, adm *kadm.Client, group, topic string) {
	t.Helper()
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: 0, LeaderEpoch: -1})
	resp, err := adm.CommitOffsets(testContext(t), group, os)
	if err != nil || resp.Error() != nil {
		t.Fatalf("first commit: %v %v", err, resp.Error())
	}
}

func TestPipelinedOffsetCommitsTakeEffectInOrder(t *testing.T) {
	ts := startServer(t, "")
	adm := ts.admin(t)
	createTopic(t, adm, "ordered", 1, nil)
	readyGroupCoordinator(t, adm, "g-ordered", "ordered")

	const n = 300
	var reqs []kmsg.Request
	for i := 1; i <= n; i++ {
		reqs = append(reqs, commitRequest("g-ordered", "ordered", 0, int64(i)))
		if i%10 == 0 {
			reqs = append(reqs, offsetFetchRequest("g-ordered", "ordered", 0))
		}
	}
	last := int64(0)
	for i, resp := range pipeline(t, ts.addr, reqs) {
		switch r := resp.(type) {
		case *kmsg.OffsetCommitResponse:
			if code := r.Topics[0].Partitions[0].ErrorCode; code != 0 {
				t.Fatalf("commit %d answered error %d", i, code)
			}
			last = reqs[i].(*kmsg.OffsetCommitRequest).Topics[0].Partitions[0].Offset
		case *kmsg.OffsetFetchResponse:
			// A fetch reads what every commit sent before it wrote.
			if got := fetchedOffset(t, r); got != last {
				t.Fatalf("offset fetch after the commit of %d read %d", last, got)
			}
		}
	}
	offs, err := adm.FetchOffsets(testContext(t), "g-ordered")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := offs.Lookup("ordered", 0); o.At != n {
		t.Fatalf("committed offset after %d pipelined commits is %d, want %d", n, o.At, n)
	}
}

func TestPipelinedGroupAdminInOrder(t *testing.T) {
	ts := startServer(t, "")
	adm := ts.admin(t)
	createTopic(t, adm, "admin-ordered", 1, nil)
	readyGroupCoordinator(t, adm, "g-admin", "admin-ordered")

	del := kmsg.NewPtrOffsetDeleteRequest()
	del.Group = "g-admin"
	dt := kmsg.NewOffsetDeleteRequestTopic()
	dt.Topic = "admin-ordered"
	dp := kmsg.NewOffsetDeleteRequestTopicPartition()
	dt.Partitions = append(dt.Partitions, dp)
	del.Topics = append(del.Topics, dt)

	delGroup := kmsg.NewPtrDeleteGroupsRequest()
	delGroup.Version = 2
	delGroup.Groups = []string{"g-admin"}

	var reqs []kmsg.Request
	for round := range 20 {
		base := int64(round * 10)
		reqs = append(reqs,
			commitRequest("g-admin", "admin-ordered", 0, base+5),
			offsetFetchRequest("g-admin", "admin-ordered", 0), // base+5
			del,
			offsetFetchRequest("g-admin", "admin-ordered", 0), // -1
			commitRequest("g-admin", "admin-ordered", 0, base+7),
			delGroup,
			offsetFetchRequest("g-admin", "admin-ordered", 0), // -1
			commitRequest("g-admin", "admin-ordered", 0, base+9),
			offsetFetchRequest("g-admin", "admin-ordered", 0), // base+9
		)
	}
	resps := pipeline(t, ts.addr, reqs)
	for round := range 20 {
		base := int64(round * 10)
		r := resps[round*9 : round*9+9]
		want := []int64{base + 5, -1, -1, base + 9}
		got := []int64{fetchedOffset(t, r[1]), fetchedOffset(t, r[3]), fetchedOffset(t, r[6]), fetchedOffset(t, r[8])}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			for _, x := range r {
				t.Logf("%T %+v", x, x)
			}
			t.Fatalf("round %d: fetches read %v, want %v", round, got, want)
		}
		if code := r[2].(*kmsg.OffsetDeleteResponse).ErrorCode; code != 0 {
			t.Fatalf("round %d: OffsetDelete answered %d", round, code)
		}
		if code := r[5].(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode; code != 0 {
			t.Fatalf("round %d: DeleteGroups answered %d", round, code)
		}
	}
}

func TestPipelinedProducesAppendInOrder(t *testing.T) {
	ts := startServer(t, "")
	adm := ts.admin(t)
	createTopic(t, adm, "produce-ordered", 1, nil)

	const n = 200
	var reqs []kmsg.Request
	for i := range n {
		req := kmsg.NewPtrProduceRequest()
		req.Version = 9
		req.Acks = -1
		req.TimeoutMillis = 10000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "produce-ordered"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = testBatch(t, strconv.Itoa(i))
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		reqs = append(reqs, req)
	}
	for i, resp := range pipeline(t, ts.addr, reqs) {
		p := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.BaseOffset != int64(i) {
			t.Fatalf("produce %d answered error %d at offset %d", i, p.ErrorCode, p.BaseOffset)
		}
	}
	got := consumeExactly(t, ts.addr, "produce-ordered", n)
	for i, r := range got {
		if string(r.Value) != strconv.Itoa(i) || r.Offset != int64(i) {
			t.Fatalf("record %d is %q at offset %d", i, r.Value, r.Offset)
		}
	}
}

func TestPipelinedConfigChangesInOrder(t *testing.T) {
	ts := startServer(t, "")
	adm := ts.admin(t)
	createTopic(t, adm, "config-ordered", 1, nil)

	describe := kmsg.NewPtrDescribeConfigsRequest()
	describe.Version = 4
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType = kmsg.ConfigResourceTypeTopic
	dr.ResourceName = "config-ordered"
	dr.ConfigNames = []string{"retention.ms"}
	describe.Resources = append(describe.Resources, dr)

	const n = 100
	var reqs []kmsg.Request
	for i := 1; i <= n; i++ {
		alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
		alter.Version = 1
		ar := kmsg.NewIncrementalAlterConfigsRequestResource()
		ar.ResourceType = kmsg.ConfigResourceTypeTopic
		ar.ResourceName = "config-ordered"
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name = "retention.ms"
		c.Value = kmsg.StringPtr(strconv.Itoa(100000 + i))
		ar.Configs = append(ar.Configs, c)
		alter.Resources = append(alter.Resources, ar)
		reqs = append(reqs, alter, describe)
	}
	resps := pipeline(t, ts.addr, reqs)
	for i := 0; i < len(resps); i += 2 {
		if code := resps[i].(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode; code != 0 {
			t.Fatalf("alter %d answered %d", i/2, code)
		}
		d := resps[i+1].(*kmsg.DescribeConfigsResponse).Resources[0]
		want := strconv.Itoa(100000 + i/2 + 1)
		if d.ErrorCode != 0 || len(d.Configs) != 1 || d.Configs[0].Value == nil || *d.Configs[0].Value != want {
			t.Fatalf("describe after alter %d: %+v, want retention.ms=%s", i/2, d, want)
		}
	}
}

func TestPipelinedTransactionRequestsInOrder(t *testing.T) {
	ts := startServer(t, "")
	adm := ts.admin(t)
	const parts = 20
	createTopic(t, adm, "txn-ordered", parts, nil)

	// A producer id for the transactional id, through a client that
	// retries until the transaction coordinator is ready.
	cl := ts.client(t, kgo.TransactionalID("txn-ordered-id"), kgo.DefaultProduceTopic("txn-ordered"))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(testContext(t), &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(testContext(t), kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := cl.ProducerID(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	cl.Close()
	// The abort's markers are written after EndTxn answers; until then
	// an AddPartitionsToTxn gets CONCURRENT_TRANSACTIONS, as in Kafka.
	if d := waitTxnState(t, adm, "txn-ordered-id", "CompleteAbort"); d.State != "CompleteAbort" {
		t.Fatalf("first transaction %s after its abort, want CompleteAbort", d.State)
	}

	// Each partition added on its own request, then the end of the
	// transaction: Kafka would have added all before it ends.
	var reqs []kmsg.Request
	for p := range int32(parts) {
		add := kmsg.NewPtrAddPartitionsToTxnRequest()
		add.Version = 3
		add.TransactionalID = "txn-ordered-id"
		add.ProducerID, add.ProducerEpoch = pid, epoch
		at := kmsg.NewAddPartitionsToTxnRequestTopic()
		at.Topic = "txn-ordered"
		at.Partitions = []int32{p}
		add.Topics = append(add.Topics, at)
		reqs = append(reqs, add)
	}
	describe := kmsg.NewPtrDescribeTransactionsRequest()
	describe.TransactionalIDs = []string{"txn-ordered-id"}
	end := kmsg.NewPtrEndTxnRequest()
	end.Version = 3
	end.TransactionalID = "txn-ordered-id"
	end.ProducerID, end.ProducerEpoch = pid, epoch
	reqs = append(reqs, describe, end)

	resps := pipeline(t, ts.addr, reqs)
	for p := range parts {
		if code := resps[p].(*kmsg.AddPartitionsToTxnResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("add partition %d answered %d", p, code)
		}
	}
	d := resps[parts].(*kmsg.DescribeTransactionsResponse).TransactionStates[0]
	n := 0
	for _, tp := range d.Topics {
		n += len(tp.Partitions)
	}
	if d.ErrorCode != 0 || d.State != "Ongoing" || n != parts {
		t.Fatalf("described after %d adds: state %s, %d partitions, error %d", parts, d.State, n, d.ErrorCode)
	}
	if code := resps[parts+1].(*kmsg.EndTxnResponse).ErrorCode; code != 0 {
		t.Fatalf("EndTxn after the adds answered %d", code)
	}
}

func TestPipelinedTopicAdminInOrder(t *testing.T) {
	ts := startServer(t, "")
	create := func(name string) *kmsg.CreateTopicsRequest {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version = 5
		req.TimeoutMillis = 10000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
		req.Topics = append(req.Topics, rt)
		return req
	}
	del := func(name string) *kmsg.DeleteTopicsRequest {
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.Version = 5
		req.TimeoutMillis = 10000
		req.TopicNames = []string{name}
		return req
	}
	metadata := kmsg.NewPtrMetadataRequest()
	metadata.Version = 9
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("flip")
	metadata.Topics = append(metadata.Topics, mt)

	// Created, deleted and created again, ten times over: each request
	// sees the one before it done.
	var reqs []kmsg.Request
	for range 10 {
		reqs = append(reqs, create("flip"), metadata, del("flip"), metadata)
	}
	resps := pipeline(t, ts.addr, reqs)
	for i := 0; i < len(resps); i += 4 {
		if code := resps[i].(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != 0 {
			t.Fatalf("create %d answered %d", i/4, code)
		}
		if code := resps[i+1].(*kmsg.MetadataResponse).Topics[0].ErrorCode; code != 0 {
			t.Fatalf("metadata after create %d answered %d", i/4, code)
		}
		if code := resps[i+2].(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode; code != 0 {
			t.Fatalf("delete %d answered %d", i/4, code)
		}
		if code := resps[i+3].(*kmsg.MetadataResponse).Topics[0].ErrorCode; code != 3 {
			t.Fatalf("metadata after delete %d answered %d, want UNKNOWN_TOPIC_OR_PARTITION", i/4, code)
		}
	}
}
