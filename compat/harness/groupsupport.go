package harness

// GroupSupport says whether a client of Clients has a share consumer
// (KIP-932 share groups) and a streams-group client (KIP-1071, Kafka
// Streams with group.protocol=streams), with the version checked, and
// what exercises each against Gregor and Kafka. It is kept by hand: the
// runs do not find out what a library offers.
type GroupSupport struct {
	// Client is a Client's Name.
	Client string
	// Share and Streams say what the client has and what tests it, or
	// "client has no support" with its version.
	Share, Streams string
}

// GroupSupports has one entry per client, in the order of Clients.
var GroupSupports = []GroupSupport{
	{"franz-go", "kgo share consumer (`kgo.ShareGroup`, franz-go v1.22.3): driven against Gregor by `broker/share_test.go` (not in this matrix, not run against Kafka)", "client has no support (franz-go v1.22.3 has no Streams runtime)"},
	{"sarama", "client has no support (sarama v1.61.1)", "client has no support (sarama v1.61.1)"},
	{"kafka-go", "client has no support (kafka-go v0.4.51)", "client has no support (kafka-go v0.4.51)"},
	{"kcat", "client has no support (kcat 1.7.1, librdkafka 2.0.2)", "client has no support (kcat 1.7.1)"},
	{"confluent-kafka-python", "client has no support (confluent-kafka 1.7.0, librdkafka 2.0.2)", "client has no support (confluent-kafka 1.7.0)"},
	{"confluent-kafka-python-2", "`ShareConsumer` (librdkafka 2.16.0's KIP-932 consumer, explicit acknowledgement): `share.consume` by `TestConfluentShareConsumer`, on Gregor and on Kafka 4.4", "client has no support (confluent-kafka 2.16.1, librdkafka 2.16.0)"},
	{"kafka-python", "client has no support (kafka-python 2.0.2)", "client has no support (kafka-python 2.0.2)"},
	{"aiokafka", "client has no support (aiokafka 0.14.0)", "client has no support (aiokafka 0.14.0)"},
	{"kafkajs", "client has no support (kafkajs 2.2.4)", "client has no support (kafkajs 2.2.4)"},
	{"java", "`KafkaShareConsumer` (kafka-clients 4.4.0): `share.consume` by `TestJava`, on Gregor and on Kafka 4.4", "Kafka Streams 4.4.0 with `group.protocol=streams`: `streams.protocol` by `TestJava`, and `TestStreamsGroupScale` (one, three, one instances, exactly_once_v2, Gregor SIGKILLed under three), on Gregor and on Kafka 4.4"},
}
