package raftmeta

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The controller RPCs between nodes (see wire.go for the framing). Bodies
// are written with the metadata records' encoder; every decoder checks
// lengths before allocating and rejects trailing bytes.
const (
	rpcCreateTopics        byte = 1
	rpcDeleteTopics        byte = 2
	rpcCreatePartitions    byte = 3
	rpcAlterConfigs        byte = 4
	rpcRegisterBroker      byte = 5
	rpcAllocateProducerIDs byte = 6
	rpcAlterPartition      byte = 7
	rpcElectLeaders        byte = 8
	rpcBrokerHeartbeat     byte = 9
	rpcDescribeQuorum      byte = 10
	rpcAddLearner          byte = 11
	rpcAlterReassignments  byte = 12
	rpcListReassignments   byte = 13
)

// apiErr writes err as a Kafka error code and message.
func (e *encoder) apiErr(err error) {
	code := ErrorCode(err)
	e.int16(code)
	if code == 0 {
		return
	}
	msg := ErrorMessage(err)
	if _, ok := errors.AsType[*kerr.Error](err); !ok {
		s := err.Error()
		msg = &s
	}
	e.nullableString(msg)
}

// apiErr reads what encoder.apiErr wrote.
func (d *decoder) apiErr() error {
	code := d.int16()
	if d.err != nil || code == 0 {
		return nil
	}
	msg := d.nullableString()
	e := &Error{Code: kerr.TypedErrorForCode(code)}
	if msg != nil {
		e.Message = *msg
	}
	return e
}

func (e *encoder) strs(v []string) {
	e.uvarint(uint64(len(v)))
	for _, s := range v {
		e.string(s)
	}
}

func (d *decoder) strs() []string {
	n := d.count(1)
	var v []string
	for i := 0; i < n && d.err == nil; i++ {
		v = append(v, d.string())
	}
	return v
}

func (e *encoder) partitionImage(p PartitionImage) {
	e.int32(p.Partition)
	e.int32s(p.Replicas)
	e.int32s(p.ISR)
	e.int32(p.Leader)
	e.int32(p.LeaderEpoch)
	e.int32(p.PartitionEpoch)
	e.int32s(p.AddingReplicas)
	e.int32s(p.RemovingReplicas)
}

func (d *decoder) partitionImage() PartitionImage {
	return PartitionImage{
		Partition:        d.int32(),
		Replicas:         d.int32s(),
		ISR:              d.int32s(),
		Leader:           d.int32(),
		LeaderEpoch:      d.int32(),
		PartitionEpoch:   d.int32(),
		AddingReplicas:   nonEmpty(d.int32s()),
		RemovingReplicas: nonEmpty(d.int32s()),
	}
}

// finish fails d if bytes are left over, and returns its error.
func (d *decoder) finish(what string) error {
	if d.err == nil && len(d.buf) != 0 {
		d.fail("%d trailing bytes", len(d.buf))
	}
	if d.err != nil {
		return fmt.Errorf("decode %s: %w", what, d.err)
	}
	return nil
}

func encodeCreateTopicsReq(topics []CreateTopic, validateOnly bool) []byte {
	e := encoder{}
	e.uvarint(uint64(len(topics)))
	for _, t := range topics {
		e.string(t.Name)
		e.int32(t.NumPartitions)
		e.int16(t.ReplicationFactor)
		e.uvarint(uint64(len(t.Assignments)))
		for p, replicas := range t.Assignments {
			e.int32(p)
			e.int32s(replicas)
		}
		e.uvarint(uint64(len(t.Configs)))
		for k, v := range t.Configs {
			e.string(k)
			e.string(v)
		}
	}
	e.bool(validateOnly)
	return e.buf
}

func decodeCreateTopicsReq(b []byte) ([]CreateTopic, bool, error) {
	d := decoder{buf: b}
	n := d.count(5)
	topics := make([]CreateTopic, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		t := CreateTopic{Name: d.string(), NumPartitions: d.int32(), ReplicationFactor: d.int16()}
		if na := d.count(2); na > 0 {
			t.Assignments = make(map[int32][]int32, na)
			for j := 0; j < na && d.err == nil; j++ {
				p := d.int32()
				t.Assignments[p] = d.int32s()
			}
		}
		if nc := d.count(2); nc > 0 {
			t.Configs = make(map[string]string, nc)
			for j := 0; j < nc && d.err == nil; j++ {
				k := d.string()
				t.Configs[k] = d.string()
			}
		}
		topics = append(topics, t)
	}
	validateOnly := d.bool()
	return topics, validateOnly, d.finish("CreateTopics request")
}

func encodeCreateTopicsResp(res []CreateTopicResult) []byte {
	e := encoder{}
	e.uvarint(uint64(len(res)))
	for _, r := range res {
		e.string(r.Name)
		e.uuid(r.ID)
		e.apiErr(r.Err)
		e.int32(r.NumPartitions)
		e.int16(r.ReplicationFactor)
	}
	return e.buf
}

func decodeCreateTopicsResp(b []byte) ([]CreateTopicResult, error) {
	d := decoder{buf: b}
	n := d.count(20)
	res := make([]CreateTopicResult, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		res = append(res, CreateTopicResult{Name: d.string(), ID: d.uuid(), Err: d.apiErr(), NumPartitions: d.int32(), ReplicationFactor: d.int16()})
	}
	return res, d.finish("CreateTopics response")
}

func encodeDeleteTopicsReq(names []string, ids [][16]byte) []byte {
	e := encoder{}
	e.strs(names)
	e.uvarint(uint64(len(ids)))
	for _, id := range ids {
		e.uuid(id)
	}
	return e.buf
}

func decodeDeleteTopicsReq(b []byte) ([]string, [][16]byte, error) {
	d := decoder{buf: b}
	names := d.strs()
	n := d.count(16)
	var ids [][16]byte
	for i := 0; i < n && d.err == nil; i++ {
		ids = append(ids, d.uuid())
	}
	return names, ids, d.finish("DeleteTopics request")
}

func encodeDeleteTopicsResp(res []DeleteTopicResult) []byte {
	e := encoder{}
	e.uvarint(uint64(len(res)))
	for _, r := range res {
		e.string(r.Name)
		e.uuid(r.ID)
		e.apiErr(r.Err)
	}
	return e.buf
}

func decodeDeleteTopicsResp(b []byte) ([]DeleteTopicResult, error) {
	d := decoder{buf: b}
	n := d.count(18)
	res := make([]DeleteTopicResult, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		res = append(res, DeleteTopicResult{Name: d.string(), ID: d.uuid(), Err: d.apiErr()})
	}
	return res, d.finish("DeleteTopics response")
}

func encodeCreatePartitionsReq(reqs []CreatePartitions, validateOnly bool) []byte {
	e := encoder{}
	e.uvarint(uint64(len(reqs)))
	for _, r := range reqs {
		e.string(r.Topic)
		e.int32(r.Count)
		if r.Assignments == nil {
			e.varint(-1)
		} else {
			e.varint(int64(len(r.Assignments)))
			for _, a := range r.Assignments {
				e.int32s(a)
			}
		}
	}
	e.bool(validateOnly)
	return e.buf
}

func decodeCreatePartitionsReq(b []byte) ([]CreatePartitions, bool, error) {
	d := decoder{buf: b}
	n := d.count(3)
	reqs := make([]CreatePartitions, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		r := CreatePartitions{Topic: d.string(), Count: d.int32()}
		na := d.varint()
		switch {
		case d.err != nil || na == -1:
		case na < 0 || na > int64(len(d.buf)):
			d.fail("bad assignment count %d", na)
		default:
			r.Assignments = make([][]int32, 0, na)
			for j := int64(0); j < na && d.err == nil; j++ {
				r.Assignments = append(r.Assignments, d.int32s())
			}
		}
		reqs = append(reqs, r)
	}
	validateOnly := d.bool()
	return reqs, validateOnly, d.finish("CreatePartitions request")
}

func encodeCreatePartitionsResp(res []CreatePartitionsResult) []byte {
	e := encoder{}
	e.uvarint(uint64(len(res)))
	for _, r := range res {
		e.string(r.Topic)
		e.apiErr(r.Err)
	}
	return e.buf
}

func decodeCreatePartitionsResp(b []byte) ([]CreatePartitionsResult, error) {
	d := decoder{buf: b}
	n := d.count(2)
	res := make([]CreatePartitionsResult, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		res = append(res, CreatePartitionsResult{Topic: d.string(), Err: d.apiErr()})
	}
	return res, d.finish("CreatePartitions response")
}

type alterConfigsReq struct {
	resourceType int8
	name         string
	set          map[string]*string
	validateOnly bool
}

func encodeAlterConfigsReq(r alterConfigsReq) []byte {
	e := encoder{}
	e.int8(r.resourceType)
	e.string(r.name)
	e.uvarint(uint64(len(r.set)))
	for k, v := range r.set {
		e.string(k)
		e.nullableString(v)
	}
	e.bool(r.validateOnly)
	return e.buf
}

func decodeAlterConfigsReq(b []byte) (alterConfigsReq, error) {
	d := decoder{buf: b}
	r := alterConfigsReq{resourceType: d.int8(), name: d.string()}
	n := d.count(2)
	r.set = make(map[string]*string, n)
	for i := 0; i < n && d.err == nil; i++ {
		k := d.string()
		r.set[k] = d.nullableString()
	}
	r.validateOnly = d.bool()
	return r, d.finish("AlterConfigs request")
}

func encodeErrResp(err error) []byte {
	e := encoder{}
	e.apiErr(err)
	return e.buf
}

func decodeErrResp(b []byte) (error, error) {
	d := decoder{buf: b}
	err := d.apiErr()
	return err, d.finish("response")
}

func encodeRegisterBrokerReq(r RegisterBrokerRecord) []byte {
	e := encoder{}
	r.encode(&e)
	return e.buf
}

func decodeRegisterBrokerReq(b []byte) (RegisterBrokerRecord, error) {
	d := decoder{buf: b}
	var r RegisterBrokerRecord
	r.decode(&d)
	return r, d.finish("RegisterBroker request")
}

func encodeInt64sResp(err error, v ...int64) []byte {
	e := encoder{}
	for _, x := range v {
		e.int64(x)
	}
	e.apiErr(err)
	return e.buf
}

// decodeInt64sResp reads n int64s and an error.
func decodeInt64sResp(b []byte, n int) ([]int64, error, error) {
	d := decoder{buf: b}
	v := make([]int64, n)
	for i := range v {
		v[i] = d.int64()
	}
	err := d.apiErr()
	return v, err, d.finish("response")
}

type alterPartitionReq struct {
	topicID        [16]byte
	partition      int32
	leaderEpoch    int32
	partitionEpoch int32
	newISR         []ISRMember
}

// encodeAlterPartitionReq writes the ISR's ids where the first format had
// them and the members' broker epochs after, so a request of the first
// format (without epochs) still decodes.
func encodeAlterPartitionReq(r alterPartitionReq) []byte {
	e := encoder{}
	e.uuid(r.topicID)
	e.int32(r.partition)
	e.int32(r.leaderEpoch)
	e.int32(r.partitionEpoch)
	e.int32s(isrIDs(r.newISR))
	e.uvarint(uint64(len(r.newISR)))
	for _, m := range r.newISR {
		e.int64(m.BrokerEpoch)
	}
	return e.buf
}

// decodeAlterPartitionReq reads either format: a request that ends after
// the ISR's ids names no broker epochs, which are then -1 (unknown, not
// checked), as a Kafka AlterPartition before version 3.
func decodeAlterPartitionReq(b []byte) (alterPartitionReq, error) {
	d := decoder{buf: b}
	r := alterPartitionReq{topicID: d.uuid(), partition: d.int32(), leaderEpoch: d.int32(), partitionEpoch: d.int32()}
	ids := d.int32s()
	if ids != nil {
		r.newISR = make([]ISRMember, len(ids))
		for i, id := range ids {
			r.newISR[i] = ISRMember{ID: id, BrokerEpoch: -1}
		}
	}
	if d.err == nil && len(d.buf) > 0 {
		if n := d.count(1); d.err == nil && n != len(ids) {
			d.fail("%d broker epochs for an ISR of %d", n, len(ids))
		}
		for i := range r.newISR {
			r.newISR[i].BrokerEpoch = d.int64()
		}
	}
	if err := d.finish("AlterPartition request"); err != nil {
		return alterPartitionReq{}, err
	}
	return r, nil
}

func encodeAlterPartitionResp(p PartitionImage, err error) []byte {
	e := encoder{}
	e.partitionImage(p)
	e.apiErr(err)
	return e.buf
}

func decodeAlterPartitionResp(b []byte) (PartitionImage, error, error) {
	d := decoder{buf: b}
	p := d.partitionImage()
	err := d.apiErr()
	return p, err, d.finish("AlterPartition response")
}

func encodeElectLeadersReq(typ ElectionType, topics []TopicPartitions) []byte {
	e := encoder{}
	e.int8(int8(typ))
	if topics == nil {
		e.varint(-1)
	} else {
		e.varint(int64(len(topics)))
		for _, t := range topics {
			e.string(t.Topic)
			e.int32s(t.Partitions)
		}
	}
	return e.buf
}

func decodeElectLeadersReq(b []byte) (ElectionType, []TopicPartitions, error) {
	d := decoder{buf: b}
	typ := ElectionType(d.int8())
	n := d.varint()
	var topics []TopicPartitions
	switch {
	case d.err != nil || n == -1:
	case n < 0 || n > int64(len(d.buf)/2):
		d.fail("bad topic count %d", n)
	default:
		topics = make([]TopicPartitions, 0, n)
		for i := int64(0); i < n && d.err == nil; i++ {
			topics = append(topics, TopicPartitions{Topic: d.string(), Partitions: d.int32s()})
		}
	}
	return typ, topics, d.finish("ElectLeaders request")
}

func encodeElectLeadersResp(res []ElectLeadersTopicResult, err error) []byte {
	e := encoder{}
	e.apiErr(err)
	e.uvarint(uint64(len(res)))
	for _, t := range res {
		e.string(t.Topic)
		e.uvarint(uint64(len(t.Partitions)))
		for _, p := range t.Partitions {
			e.int32(p.Partition)
			e.apiErr(p.Err)
		}
	}
	return e.buf
}

func decodeElectLeadersResp(b []byte) ([]ElectLeadersTopicResult, error, error) {
	d := decoder{buf: b}
	callErr := d.apiErr()
	n := d.count(2)
	res := make([]ElectLeadersTopicResult, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		t := ElectLeadersTopicResult{Topic: d.string()}
		np := d.count(2)
		t.Partitions = make([]ElectLeadersPartitionResult, 0, np)
		for j := 0; j < np && d.err == nil; j++ {
			t.Partitions = append(t.Partitions, ElectLeadersPartitionResult{Partition: d.int32(), Err: d.apiErr()})
		}
		res = append(res, t)
	}
	if callErr != nil {
		res = nil
	}
	return res, callErr, d.finish("ElectLeaders response")
}

// encodeHeartbeatReq writes a heartbeat. The offline partitions, added
// after the first version, follow the other fields and are left out when
// there are none, so a healthy broker's heartbeat is byte for byte what a
// controller from before them reads. Such a controller refuses (as
// trailing bytes) only a heartbeat that lists some, which it could not
// act on anyway.
func encodeHeartbeatReq(hb BrokerHeartbeat) []byte {
	e := encoder{}
	e.int32(hb.BrokerID)
	e.int64(hb.BrokerEpoch)
	e.int64(hb.CurrentMetadataOffset)
	e.bool(hb.WantFence)
	e.bool(hb.WantShutdown)
	if len(hb.OfflinePartitions) > 0 {
		e.uvarint(uint64(len(hb.OfflinePartitions)))
		for _, tp := range hb.OfflinePartitions {
			e.uuid(tp.TopicID)
			e.int32(tp.Partition)
		}
	}
	return e.buf
}

func decodeHeartbeatReq(b []byte) (BrokerHeartbeat, error) {
	d := decoder{buf: b}
	hb := BrokerHeartbeat{BrokerID: d.int32(), BrokerEpoch: d.int64(), CurrentMetadataOffset: d.int64(), WantFence: d.bool(), WantShutdown: d.bool()}
	if d.err == nil && len(d.buf) > 0 {
		// A topic ID and a partition take at least 17 bytes.
		n := d.count(17)
		hb.OfflinePartitions = make([]TopicIDPartition, 0, n)
		for i := 0; i < n && d.err == nil; i++ {
			hb.OfflinePartitions = append(hb.OfflinePartitions, TopicIDPartition{TopicID: d.uuid(), Partition: d.int32()})
		}
	}
	return hb, d.finish("BrokerHeartbeat request")
}

func encodeHeartbeatResp(r BrokerHeartbeatResult, err error) []byte {
	e := encoder{}
	e.bool(r.IsCaughtUp)
	e.bool(r.IsFenced)
	e.bool(r.ShouldShutdown)
	e.apiErr(err)
	return e.buf
}

func decodeHeartbeatResp(b []byte) (BrokerHeartbeatResult, error, error) {
	d := decoder{buf: b}
	r := BrokerHeartbeatResult{IsCaughtUp: d.bool(), IsFenced: d.bool(), ShouldShutdown: d.bool()}
	err := d.apiErr()
	return r, err, d.finish("BrokerHeartbeat response")
}

func (e *encoder) replicas(rs []ReplicaInfo) {
	e.uvarint(uint64(len(rs)))
	for _, r := range rs {
		e.int32(r.ID)
		e.int64(r.LogEndOffset)
		e.int64(r.LastFetchTimestamp)
		e.int64(r.LastCaughtUpTimestamp)
	}
}

func (d *decoder) replicas() []ReplicaInfo {
	n := d.count(4)
	var rs []ReplicaInfo
	for i := 0; i < n && d.err == nil; i++ {
		rs = append(rs, ReplicaInfo{ID: d.int32(), LogEndOffset: d.int64(), LastFetchTimestamp: d.int64(), LastCaughtUpTimestamp: d.int64()})
	}
	return rs
}

func encodeQuorumResp(q QuorumInfo, err error) []byte {
	e := encoder{}
	e.int32(q.LeaderID)
	e.int32(q.LeaderEpoch)
	e.int64(q.HighWatermark)
	e.replicas(q.Voters)
	e.replicas(q.Observers)
	e.apiErr(err)
	return e.buf
}

func decodeQuorumResp(b []byte) (QuorumInfo, error, error) {
	d := decoder{buf: b}
	q := QuorumInfo{LeaderID: d.int32(), LeaderEpoch: d.int32(), HighWatermark: d.int64()}
	q.Voters = d.replicas()
	q.Observers = d.replicas()
	err := d.apiErr()
	return q, err, d.finish("DescribeQuorum response")
}

func encodeAlterReassignmentsReq(topics []ReassignTopic, allowRFChange bool) []byte {
	e := encoder{}
	e.bool(allowRFChange)
	e.uvarint(uint64(len(topics)))
	for _, t := range topics {
		e.string(t.Topic)
		e.uvarint(uint64(len(t.Partitions)))
		for _, p := range t.Partitions {
			e.int32(p.Partition)
			e.int32s(p.Replicas) // nil, a cancel, stays nil
		}
	}
	return e.buf
}

func decodeAlterReassignmentsReq(b []byte) ([]ReassignTopic, bool, error) {
	d := decoder{buf: b}
	allow := d.bool()
	n := d.count(2)
	topics := make([]ReassignTopic, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		t := ReassignTopic{Topic: d.string()}
		np := d.count(2)
		t.Partitions = make([]ReassignPartition, 0, np)
		for j := 0; j < np && d.err == nil; j++ {
			t.Partitions = append(t.Partitions, ReassignPartition{Partition: d.int32(), Replicas: d.int32s()})
		}
		topics = append(topics, t)
	}
	return topics, allow, d.finish("AlterPartitionReassignments request")
}

func encodeAlterReassignmentsResp(res []ReassignTopicResult, err error) []byte {
	e := encoder{}
	e.apiErr(err)
	e.uvarint(uint64(len(res)))
	for _, t := range res {
		e.string(t.Topic)
		e.uvarint(uint64(len(t.Partitions)))
		for _, p := range t.Partitions {
			e.int32(p.Partition)
			e.apiErr(p.Err)
		}
	}
	return e.buf
}

func decodeAlterReassignmentsResp(b []byte) ([]ReassignTopicResult, error, error) {
	d := decoder{buf: b}
	callErr := d.apiErr()
	n := d.count(2)
	res := make([]ReassignTopicResult, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		t := ReassignTopicResult{Topic: d.string()}
		np := d.count(2)
		t.Partitions = make([]ReassignPartitionResult, 0, np)
		for j := 0; j < np && d.err == nil; j++ {
			t.Partitions = append(t.Partitions, ReassignPartitionResult{Partition: d.int32(), Err: d.apiErr()})
		}
		res = append(res, t)
	}
	if callErr != nil {
		res = nil
	}
	return res, callErr, d.finish("AlterPartitionReassignments response")
}

// encodeListReassignmentsReq writes the topics to list, -1 for all.
func encodeListReassignmentsReq(topics []TopicPartitions) []byte {
	e := encoder{}
	if topics == nil {
		e.varint(-1)
		return e.buf
	}
	e.varint(int64(len(topics)))
	for _, t := range topics {
		e.string(t.Topic)
		e.int32s(t.Partitions)
	}
	return e.buf
}

func decodeListReassignmentsReq(b []byte) ([]TopicPartitions, error) {
	d := decoder{buf: b}
	n := d.varint()
	var topics []TopicPartitions
	switch {
	case d.err != nil || n == -1:
	case n < 0 || n > int64(len(d.buf)/2):
		d.fail("bad topic count %d", n)
	default:
		topics = make([]TopicPartitions, 0, n)
		for i := int64(0); i < n && d.err == nil; i++ {
			topics = append(topics, TopicPartitions{Topic: d.string(), Partitions: d.int32s()})
		}
	}
	return topics, d.finish("ListPartitionReassignments request")
}

func encodeListReassignmentsResp(res []OngoingTopicReassignments, err error) []byte {
	e := encoder{}
	e.apiErr(err)
	e.uvarint(uint64(len(res)))
	for _, t := range res {
		e.string(t.Topic)
		e.uvarint(uint64(len(t.Partitions)))
		for _, p := range t.Partitions {
			e.int32(p.Partition)
			e.int32s(p.Replicas)
			e.int32s(p.AddingReplicas)
			e.int32s(p.RemovingReplicas)
		}
	}
	return e.buf
}

func decodeListReassignmentsResp(b []byte) ([]OngoingTopicReassignments, error, error) {
	d := decoder{buf: b}
	callErr := d.apiErr()
	n := d.count(2)
	res := make([]OngoingTopicReassignments, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		t := OngoingTopicReassignments{Topic: d.string()}
		// A partition takes at least four bytes: its index and three arrays.
		np := d.count(4)
		t.Partitions = make([]OngoingReassignment, 0, np)
		for j := 0; j < np && d.err == nil; j++ {
			t.Partitions = append(t.Partitions, OngoingReassignment{
				Partition: d.int32(), Replicas: d.int32s(), AddingReplicas: d.int32s(), RemovingReplicas: d.int32s(),
			})
		}
		res = append(res, t)
	}
	if callErr != nil {
		res = nil
	}
	return res, callErr, d.finish("ListPartitionReassignments response")
}
