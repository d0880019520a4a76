package integration

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// history records what producers sent and what the cluster acknowledged,
// and checks a log read back against it: no acknowledged record lost, none
// duplicated, and each producer's records in the order it sent them.
//
// Values are "producer:sequence" with sequences counting up from 0 per
// producer, so the checker needs nothing but the values.
//
// It also records what consumers read while the test ran: a consumer must
// never have seen a record that the cluster later truncated, so every
// record consumed must still be in the final log at the same offset.
type history struct {
	mu       sync.Mutex
	acked    map[string]map[int]ackedAt // producer → sequence → where it landed
	consumed map[ackedAt]string         // partition/offset → the value a consumer read there
	reread   []string                   // one offset consumed with two different values
}

type ackedAt struct {
	partition int32
	offset    int64
}

func newHistory() *history {
	return &history{acked: make(map[string]map[int]ackedAt), consumed: make(map[ackedAt]string)}
}

func recordValue(producer string, seq int) []byte {
	return []byte(producer + ":" + strconv.Itoa(seq))
}

func parseValue(v []byte) (string, int, error) {
	i := strings.LastIndexByte(string(v), ':')
	if i < 0 {
		return "", 0, fmt.Errorf("value %q is not producer:sequence", v)
	}
	seq, err := strconv.Atoi(string(v[i+1:]))
	return string(v[:i]), seq, err
}

// ack notes that the record producer:seq was acknowledged at
// partition/offset.
func (h *history) ack(producer string, seq int, partition int32, offset int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.acked[producer]
	if m == nil {
		m = make(map[int]ackedAt)
		h.acked[producer] = m
	}
	m[seq] = ackedAt{partition, offset}
}

// consume notes that a consumer read value at partition/offset.
func (h *history) consume(partition int32, offset int64, value []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	at := ackedAt{partition, offset}
	if prev, ok := h.consumed[at]; ok && prev != string(value) {
		h.reread = append(h.reread, fmt.Sprintf("consumers read %d/%d as %q and as %q", partition, offset, prev, value))
		return
	}
	h.consumed[at] = string(value)
}

func (h *history) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, m := range h.acked {
		n += len(m)
	}
	return n
}

// readRecord is a record as read back from the cluster.
type readRecord struct {
	partition int32
	offset    int64
	value     []byte
}

// check compares a full read of the topic with the history and returns
// every violation found (empty when the log is good).
func (h *history) check(log []readRecord) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var problems []string
	seen := make(map[string]map[int]ackedAt)
	lastSeq := make(map[string]map[int32]int) // producer → partition → last sequence read
	byPartition := make(map[int32][]readRecord)
	for _, r := range log {
		byPartition[r.partition] = append(byPartition[r.partition], r)
	}
	for p, recs := range byPartition {
		sort.Slice(recs, func(i, j int) bool { return recs[i].offset < recs[j].offset })
		for i := 1; i < len(recs); i++ {
			if recs[i].offset == recs[i-1].offset {
				problems = append(problems, fmt.Sprintf("partition %d: offset %d read twice", p, recs[i].offset))
			}
		}
		for _, r := range recs {
			prod, seq, err := parseValue(r.value)
			if err != nil {
				problems = append(problems, err.Error())
				continue
			}
			if seen[prod] == nil {
				seen[prod] = make(map[int]ackedAt)
				lastSeq[prod] = make(map[int32]int)
			}
			if prev, dup := seen[prod][seq]; dup {
				problems = append(problems, fmt.Sprintf("%s:%d duplicated at %d/%d and %d/%d", prod, seq, prev.partition, prev.offset, p, r.offset))
			}
			seen[prod][seq] = ackedAt{p, r.offset}
			if last, ok := lastSeq[prod][p]; ok && seq < last {
				problems = append(problems, fmt.Sprintf("%s: sequence %d after %d in partition %d (reordered)", prod, seq, last, p))
			}
			lastSeq[prod][p] = seq
		}
	}
	problems = append(problems, h.reread...)
	final := make(map[ackedAt]string, len(log))
	for _, r := range log {
		final[ackedAt{r.partition, r.offset}] = string(r.value)
	}
	for at, v := range h.consumed {
		switch got, ok := final[at]; {
		case !ok:
			problems = append(problems, fmt.Sprintf("consumers read %q at %d/%d, gone from the log (truncated)", v, at.partition, at.offset))
		case got != v:
			problems = append(problems, fmt.Sprintf("consumers read %q at %d/%d, the log now has %q there", v, at.partition, at.offset, got))
		}
	}
	for prod, m := range h.acked {
		for seq, at := range m {
			got, ok := seen[prod][seq]
			switch {
			case !ok:
				problems = append(problems, fmt.Sprintf("%s:%d acknowledged at %d/%d, lost", prod, seq, at.partition, at.offset))
			case got != at:
				problems = append(problems, fmt.Sprintf("%s:%d acknowledged at %d/%d, read at %d/%d", prod, seq, at.partition, at.offset, got.partition, got.offset))
			}
		}
	}
	sort.Strings(problems)
	return problems
}
