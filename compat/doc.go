// Package compat runs real Kafka clients against a real Gregor server:
// kcat (librdkafka), IBM/sarama and segmentio/kafka-go. It is its own
// module so that these clients are not dependencies of Gregor itself.
package compat
