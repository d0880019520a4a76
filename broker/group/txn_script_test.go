package group

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/coord/coordtest"
)

// execTxn runs the transaction commands of the scripts:
//
//	txn-commit g= pid= epoch= [v=] [member=] [gen=] [instance=] [meta=] t/0=5 ...
//	end-txn g= pid= [epoch=] commit=true|false
//
// txn-commit is a TxnOffsetCommit; end-txn is the marker the broker hands
// to CompleteTransaction for the group's partition.
func (s *script) execTxn(a args, out *strings.Builder) bool {
	switch a.Name {
	case "txn-commit":
		s.txnCommit(a)
	case "end-txn":
		group := a.Str("g", "g1")
		partition := PartitionFor(group, s.h.cfg.OffsetsTopicPartitions)
		marker := TxnMarker{
			ProducerID:    a.Int("pid", 1),
			ProducerEpoch: int16(a.Int("epoch", 0)),
			Commit:        a.Str("commit", "true") == "true",
		}
		answer := s.reqs.Add(a.Str("as", "end-txn"))
		sh := s.h.c.rt.ShardOf(partition)
		sh.Post(context.Background(), func() {
			sh.Machine.completeTransaction(partition, marker, func(err error) {
				if err != nil {
					answer("error: " + err.Error())
					return
				}
				answer("ok")
			})
		})
	case "load-control":
		// Append a raw control record to a partition, as another writer
		// might have left it.
		p := int32(a.Int("p", 0))
		key := (&kmsg.ControlRecordKey{Version: 0, Type: kmsg.ControlRecordKeyType(a.Int("type", 0))}).AppendTo(nil)
		if slices.Contains(a.Pos, "bad") {
			key = key[:1]
		}
		s.h.store.Inject(p, Record{Key: key, Control: true, Transactional: true, ProducerID: 9})
	case "pending":
		out.WriteString(s.pending(a.Str("g", "g1")))
	default:
		return false
	}
	return true
}

func (s *script) txnCommit(a args) {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version = int16(a.Int("v", 4))
	req.TransactionalID = a.Str("txn", "tx")
	req.Group = a.Str("g", "g1")
	req.ProducerID = a.Int("pid", 1)
	req.ProducerEpoch = int16(a.Int("epoch", 0))
	if req.Version >= 3 {
		req.MemberID = a.Str("member", "")
		req.Generation = int32(a.Int("gen", -1))
		req.InstanceID = a.OptStr("instance")
	}
	md := a.OptStr("meta")
	if n := a.Int("metasize", -1); n >= 0 {
		big := strings.Repeat("x", int(n))
		md = &big
	}
	for _, pos := range a.Pos {
		tpStr, off, _ := strings.Cut(pos, "=")
		topic, p, _ := strings.Cut(tpStr, "/")
		pn, _ := strconv.Atoi(p)
		o, _ := strconv.ParseInt(off, 10, 64)
		i := slices.IndexFunc(req.Topics, func(t kmsg.TxnOffsetCommitRequestTopic) bool { return t.Topic == topic })
		if i < 0 {
			rt := kmsg.NewTxnOffsetCommitRequestTopic()
			rt.Topic = topic
			req.Topics = append(req.Topics, rt)
			i = len(req.Topics) - 1
		}
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition = int32(pn)
		rp.Offset = o
		if req.Version >= 2 {
			rp.LeaderEpoch = int32(a.Int("lepoch", -1))
		}
		rp.Metadata = md
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	s.submit(a.Str("as", "txn-commit"), req.Group, func(m *machine, done func(string)) {
		m.txnOffsetCommit(req, func(r *kmsg.TxnOffsetCommitResponse) { done(fmtTxnCommit(r)) })
	})
}

func fmtTxnCommit(r *kmsg.TxnOffsetCommitResponse) string {
	var parts []string
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			parts = append(parts, fmt.Sprintf("%s/%d=%s", t.Topic, p.Partition, coordtest.ErrName(p.ErrorCode)))
		}
	}
	return strings.Join(parts, " ")
}

// pending prints a group's offsets pending in open transactions, by
// producer, and whether a transaction is open for it.
func (s *script) pending(group string) string {
	partition := PartitionFor(group, s.h.cfg.OffsetsTopicPartitions)
	sh := s.h.c.rt.ShardOf(partition)
	ch := make(chan string, 1)
	sh.Post(context.Background(), func() {
		p := sh.Machine.partitions[partition]
		if p == nil {
			ch <- "partition not loaded\n"
			return
		}
		var b strings.Builder
		var producers []int64
		for pid := range p.txns.open[group] {
			producers = append(producers, pid)
		}
		slices.Sort(producers)
		for _, pid := range producers {
			offsets := p.txns.pending[pid][group]
			fmt.Fprintf(&b, "pid=%d:", pid)
			for _, k := range sortedTPs(offsets) {
				fmt.Fprintf(&b, " %s/%d=%d", k.topic, k.partition, offsets[k].offset)
			}
			b.WriteString("\n")
		}
		if b.Len() == 0 {
			b.WriteString("no open transactions\n")
		}
		ch <- b.String()
	})
	return <-ch
}

func describeMarker(r Record) string {
	var k kmsg.ControlRecordKey
	if err := k.ReadFrom(r.Key); err != nil {
		return "bad control key: " + err.Error()
	}
	kind := fmt.Sprintf("control type %d", k.Type)
	switch k.Type {
	case kmsg.ControlRecordKeyTypeCommit:
		kind = "COMMIT"
	case kmsg.ControlRecordKeyTypeAbort:
		kind = "ABORT"
	}
	return fmt.Sprintf("marker %s pid=%d epoch=%d", kind, r.ProducerID, r.ProducerEpoch)
}
