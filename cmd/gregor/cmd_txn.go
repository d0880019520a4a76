package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func txnCommand() *command {
	return &command{name: "txn", aliases: []string{"transactions"}, short: "list, describe and abort transactions", sub: []*command{
		{name: "list", aliases: []string{"ls"}, args: "", run: txnList, short: "list transactional ids with their producer id and state",
			examples: `  gregor txn list
  gregor txn list --state Ongoing --json`},
		{name: "describe", argFlag: "transactional-id", args: "TXN-ID...", run: txnDescribe, short: "show a transaction's state, producer, timeout, start and partitions",
			examples: `  gregor txn describe payments-1`},
		{name: "abort", argFlag: "transactional-id", args: "[TXN-ID]", run: txnAbort,
			short: "abort a hanging transaction, by transactional id or, as kafka-transactions abort, by partition and start offset",
			long: `By TXN-ID: takes over the transactional id (InitProducerId), which makes the
coordinator abort its ongoing transaction and fences its producer.

By --topic, --partition and --start-offset: finds the producer whose open
transaction starts at that offset (DescribeProducers) and writes an abort
marker to that partition (WriteTxnMarkers), for a transaction whose
coordinator no longer knows it.`,
			examples: `  gregor txn abort payments-1
  gregor txn abort --topic orders --partition 0 --start-offset 1200`},
	}}
}

func txnList(c *cmd) error {
	var states []string
	c.listVar(&states, "state", "", "only transactions in this `state` (Ongoing, CompleteCommit, ...), repeatable")
	if err := c.parse(0, 0); err != nil {
		return err
	}
	adm, err := c.admin()
	if err != nil {
		return err
	}
	listed, err := adm.ListTransactions(c.context(), nil, states)
	if err != nil {
		return fmt.Errorf("list transactions: %w", err)
	}
	type txn struct {
		TxnID       string `json:"transactional_id"`
		ProducerID  int64  `json:"producer_id"`
		State       string `json:"state"`
		Coordinator int32  `json:"coordinator"`
	}
	out := []txn{}
	var rows [][]string
	for _, t := range listed.Sorted() {
		out = append(out, txn{t.TxnID, t.ProducerID, t.State, t.Coordinator})
		rows = append(rows, []string{t.TxnID, itoa(t.ProducerID), t.State, itoa(t.Coordinator)})
	}
	if c.json {
		return c.printJSON(out)
	}
	return c.table([]string{"TRANSACTIONAL-ID", "PRODUCER-ID", "STATE", "COORDINATOR"}, rows)
}

// describedTxn is `txn describe` of one transactional id.
type describedTxn struct {
	TxnID          string   `json:"transactional_id"`
	State          string   `json:"state"`
	ProducerID     int64    `json:"producer_id"`
	ProducerEpoch  int16    `json:"producer_epoch"`
	TimeoutMs      int32    `json:"timeout_ms"`
	StartTimestamp int64    `json:"start_timestamp"`
	Coordinator    int32    `json:"coordinator"`
	Partitions     []string `json:"partitions"`
	Error          string   `json:"error,omitempty"`
}

func txnDescribe(c *cmd) error {
	if err := c.parse(1, -1); err != nil {
		return err
	}
	adm, err := c.admin()
	if err != nil {
		return err
	}
	described, err := adm.DescribeTransactions(c.context(), c.args...)
	if err != nil {
		return fmt.Errorf("describe transactions: %w", err)
	}
	var out []describedTxn
	var rows [][]string
	failed := 0
	for _, t := range described.Sorted() {
		d := describedTxn{t.TxnID, t.State, t.ProducerID, t.ProducerEpoch, t.TimeoutMillis, t.StartTimestamp, t.Coordinator, []string{}, jsonErr(t.Err, "")}
		for _, tp := range sortedSelection(t.Topics) {
			d.Partitions = append(d.Partitions, fmt.Sprintf("%s/%d", tp.topic, tp.partition))
		}
		if t.Err != nil {
			failed++
		}
		out = append(out, d)
		start := "-"
		if t.StartTimestamp > 0 {
			start = time.UnixMilli(t.StartTimestamp).UTC().Format(time.RFC3339)
		}
		rows = append(rows, []string{t.TxnID, dash(t.State), itoa(t.ProducerID), itoa(t.ProducerEpoch), itoa(t.TimeoutMillis), start,
			itoa(t.Coordinator), dash(strings.Join(d.Partitions, ",")), errText(t.Err, "")})
	}
	return c.report([]string{"TRANSACTIONAL-ID", "STATE", "PRODUCER-ID", "EPOCH", "TIMEOUT-MS", "START", "COORDINATOR", "PARTITIONS", "STATUS"},
		rows, out, failed, "transactions")
}

func txnAbort(c *cmd) error {
	var topic string
	var partition int
	var startOffset int64
	c.stringVar(&topic, "topic", "", "", "the `topic` of the hanging transaction")
	c.intVar(&partition, "partition", "", -1, "its partition")
	c.int64Var(&startOffset, "start-offset", "", -1, "the `offset` its transaction starts at")
	if err := c.parse(0, 1); err != nil {
		return err
	}
	byPartition := topic != "" || partition >= 0 || startOffset >= 0
	switch {
	case len(c.args) == 1 && !byPartition:
		return abortByTxnID(c, c.args[0])
	case len(c.args) == 0 && topic != "" && partition >= 0 && startOffset >= 0:
		return abortByPartition(c, topic, int32(partition), startOffset)
	}
	return usagef("%s: give a TXN-ID, or --topic, --partition and --start-offset", c.path)
}

// abortByTxnID initialises a producer under the transactional id: the
// coordinator aborts the id's ongoing transaction and bumps its epoch.
func abortByTxnID(c *cmd, txnID string) error {
	adm, err := c.admin()
	if err != nil {
		return err
	}
	described, err := adm.DescribeTransactions(c.context(), txnID)
	if err != nil {
		return fmt.Errorf("describe %s: %w", txnID, err)
	}
	d, err := described.On(txnID, nil)
	if err == nil {
		err = d.Err
	}
	if err != nil {
		return fmt.Errorf("describe %s: %w", txnID, err)
	}
	if d.State != "Ongoing" {
		_, err := fmt.Fprintf(c.out, "%s has no open transaction (state %s): nothing to abort\n", txnID, d.State)
		return err
	}
	// The transaction's own timeout, which InitProducerId would otherwise
	// replace with the client's.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.ClientID("gregor-cli"), kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(time.Duration(d.TimeoutMillis)*time.Millisecond))
	if err != nil {
		return fmt.Errorf("abort %s: %w", txnID, err)
	}
	defer cl.Close()
	id, epoch, err := cl.ProducerID(c.context())
	if err != nil {
		return fmt.Errorf("abort %s: %w", txnID, err)
	}
	if c.json {
		return c.printJSON(map[string]any{"transactional_id": txnID, "producer_id": id, "producer_epoch": epoch, "aborted": true})
	}
	_, err = fmt.Fprintf(c.out, "aborted any open transaction of %s (producer id %d now at epoch %d)\n", txnID, id, epoch)
	return err
}

// abortByPartition writes an abort marker for the producer whose open
// transaction starts at startOffset, as kafka-transactions abort.
func abortByPartition(c *cmd, topic string, partition int32, startOffset int64) error {
	adm, err := c.admin()
	if err != nil {
		return err
	}
	producers, err := adm.DescribeProducers(c.context(), kadm.TopicsSet{topic: {partition: {}}})
	if err != nil {
		return fmt.Errorf("describe producers of %s/%d: %w", topic, partition, err)
	}
	var found *kadm.DescribedProducer
	producers.EachProducer(func(p kadm.DescribedProducer) {
		if p.CurrentTxnStartOffset == startOffset {
			found = &p
		}
	})
	if found == nil {
		return fmt.Errorf("no open transaction starts at offset %d of %s/%d", startOffset, topic, partition)
	}
	resp, err := adm.WriteTxnMarkers(c.context(), kadm.TxnMarkers{ProducerID: found.ProducerID, ProducerEpoch: found.ProducerEpoch,
		CoordinatorEpoch: found.CoordinatorEpoch, Topics: kadm.TopicsSet{topic: {partition: {}}}})
	if err != nil {
		return fmt.Errorf("write abort marker: %w", err)
	}
	for _, r := range resp {
		for _, ps := range r.Topics {
			for _, p := range ps.Partitions {
				if p.Err != nil {
					return fmt.Errorf("write abort marker to %s/%d: %w", topic, partition, p.Err)
				}
			}
		}
	}
	if c.json {
		return c.printJSON(map[string]any{"topic": topic, "partition": partition, "producer_id": found.ProducerID, "aborted": true})
	}
	_, err = fmt.Fprintf(c.out, "aborted the transaction of producer %d (epoch %d) starting at %s/%d offset %d\n",
		found.ProducerID, found.ProducerEpoch, topic, partition, startOffset)
	return err
}
