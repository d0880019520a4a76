package harness

// Scenario is one behaviour every client is asked to show.
type Scenario struct {
	// ID names the scenario in results and the expected table.
	ID string
	// Pass says what a pass means, for docs/compatibility.md.
	Pass string
}

// Scenarios is the suite, in the order of the table's columns.
var Scenarios = []Scenario{
	{"metadata", "the client lists the broker (node 1 at the address it dialled) and a topic with its partitions and leader"},
	{"topics.admin", "create a 3-partition topic, grow it to 5 partitions, delete it; metadata shows each step"},
	{"produce.none", "1,000 keyed records with a header, uncompressed, read back byte-exact at the offsets written"},
	{"produce.gzip", "as produce.none with gzip"},
	{"produce.snappy", "as produce.none with snappy"},
	{"produce.lz4", "as produce.none with lz4"},
	{"produce.zstd", "as produce.none with zstd"},
	{"order.key", "2,000 records over 20 keys into 4 partitions: each key stays in one partition, in the order sent"},
	{"group.resume", "a consumer group member reads half, commits and leaves; a new member of the group resumes at the commit"},
	{"group.split", "two members of one group run at once over a 4-partition topic (the client's default assignor): once both hold partitions, 200 records are written; each member reads a non-empty set of partitions, the sets are disjoint, every record is read once, no rebalance while consuming, and the commits reach the end of every partition"},
	{"producer.idempotent", "an idempotent producer's records are read once each, in order, from batches that carry its producer id"},
	{"txn.read_committed", "committed, aborted, committed transactions: read_committed sees only the committed records"},
	{"listoffsets.time", "ListOffsets by timestamp finds the first record at or after the time; earliest and latest are right"},
	{"configs.describe", "DescribeConfigs on a topic shows the value it was created with and the defaults"},
	{"configs.alter", "IncrementalAlterConfigs (AlterConfigs where the client has only that) changes a topic config that DescribeConfigs then shows"},
	{"deleterecords", "DeleteRecords moves the log start offset; consuming from the beginning starts there"},
	{"record.1mib", "a 1 MiB record (topic max.message.bytes raised) is written and read back with the same SHA-256"},
	{"bulk.100k", "100,000 small records are written and read back, count and checksum equal"},
	{"edge.unknown_topic", "with auto-create off, producing to an unknown topic fails with UNKNOWN_TOPIC_OR_PARTITION (after the client's retries) and creates nothing"},
	{"edge.too_large", "a record over the topic's max.message.bytes fails with MESSAGE_TOO_LARGE and nothing is appended"},
	{"edge.offset_past_end", "consuming from an offset past the end: OFFSET_OUT_OF_RANGE, then the client's reset policy (earliest) or its error"},
	{"edge.topic_deleted", "a topic deleted while consumed: the consumer sees the deletion (an error, or its documented silence) and closes without hanging"},
}

// ScenarioIndex is id's position in Scenarios, or len(Scenarios) when it
// is unknown.
func ScenarioIndex(id string) int {
	for i, s := range Scenarios {
		if s.ID == id {
			return i
		}
	}
	return len(Scenarios)
}

// Client is one Kafka client library or tool under test.
type Client struct {
	// Name is the client's key in results.
	Name string
	// What says which package and version, for the docs.
	What string
}

// Clients lists every client in the table, in row order.
var Clients = []Client{
	{"franz-go", "github.com/twmb/franz-go kgo and kadm (Go module, pinned in compat/go.mod)"},
	{"sarama", "github.com/IBM/sarama (Go module, pinned in compat/go.mod)"},
	{"kafka-go", "github.com/segmentio/kafka-go (Go module, pinned in compat/go.mod)"},
	{"kcat", "kcat with librdkafka (Debian packages kcat, librdkafka1)"},
	{"confluent-kafka-python", "confluent-kafka for Python with librdkafka (Debian python3-confluent-kafka)"},
	{"confluent-kafka-python-2", "confluent-kafka 2.16.1 for Python with the librdkafka 2.16.0 of its wheel (PyPI, pinned in compat/python/requirements.txt); its groups use group.protocol=consumer (KIP-848)"},
	{"kafka-python", "kafka-python (Debian python3-kafka; codecs from python3-snappy, python3-lz4, python3-zstandard)"},
	{"aiokafka", "aiokafka 0.14.0 for Python's asyncio, codecs from cramjam 2.14.0 (PyPI, pinned in compat/python/requirements.txt); DeleteRecords, idempotence and transactions included; topic configs altered with AlterConfigs (it has no IncrementalAlterConfigs)"},
	{"kafkajs", "kafkajs (npm, pinned by compat/node/package-lock.json)"},
	{"java", "Apache Kafka's Java client, kafka-clients 4.4.0 (Maven Central, pinned in compat/java/pom.xml)"},
}
