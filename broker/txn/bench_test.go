package txn

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/coord/coordtest"
)

// BenchmarkTransaction measures one small transaction (add one partition,
// commit, wait for the completion) against an in-memory store and marker
// writer: the coordinator's own cost per transaction.
func BenchmarkTransaction(b *testing.B) {
	h := newHarness(b, testConfig())
	ctx := context.Background()
	id := "bench"
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID = &id
	init.TransactionTimeoutMillis = 60000
	r := h.c.InitProducerID(ctx, init)()
	pid, epoch := r.ProducerID, r.ProducerEpoch
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.Version = 5
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID = id
	tx.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "t", Partitions: []int32{0}}}
	end := kmsg.NewPtrEndTxnRequest()
	end.Version = 5
	end.TransactionalID, end.Commit = id, true
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		for {
			tx.ProducerID, tx.ProducerEpoch = pid, epoch
			add.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{tx}
			code := h.c.AddPartitionsToTxn(ctx, add)().Transactions[0].Topics[0].Partitions[0].ErrorCode
			if code == errConcurrentTransactions {
				continue // the previous completion is still being written
			}
			if code != 0 {
				b.Fatal(coordtest.ErrName(code))
			}
			break
		}
		end.ProducerID, end.ProducerEpoch = pid, epoch
		er := h.c.EndTxn(ctx, end)()
		if er.ErrorCode != 0 {
			b.Fatal(coordtest.ErrName(er.ErrorCode))
		}
		pid, epoch = er.ProducerID, er.ProducerEpoch
	}
}

// BenchmarkVerify measures the KIP-890 verification a partition leader
// asks for before a transactional append.
func BenchmarkVerify(b *testing.B) {
	h := newHarness(b, testConfig())
	ctx := context.Background()
	id := "bench"
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID = &id
	init.TransactionTimeoutMillis = 60000
	r := h.c.InitProducerID(ctx, init)()
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = id, r.ProducerID, r.ProducerEpoch
	add.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	if code := h.c.AddPartitionsToTxn(ctx, add)().Topics[0].Partitions[0].ErrorCode; code != 0 {
		b.Fatal(coordtest.ErrName(code))
	}
	req := verifyReq(id, r.ProducerID, r.ProducerEpoch)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if code := h.c.AddPartitionsToTxn(ctx, req)().Transactions[0].Topics[0].Partitions[0].ErrorCode; code != 0 {
				panic(fmt.Sprint(coordtest.ErrName(code)))
			}
		}
	})
}
