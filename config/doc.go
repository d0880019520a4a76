// Package config holds a Gregor node's configuration in Kafka's own terms:
// the properties of Kafka 4.2's server.properties (KRaft mode), with
// Kafka's names, types, defaults and validation rules, and the topic-level
// configs of Kafka's LogConfig with the broker properties that supply their
// defaults.
//
// A broker config is read from a Java .properties file (ReadProperties,
// LoadFile), checked and typed by Parse, and described by DescribeBroker as
// DescribeConfigs shows it. Topic configs are checked by
// ValidateTopicConfigs, resolved against the broker's defaults by
// Broker.TopicConfig, and described by Broker.DescribeTopic.
//
// Unknown broker properties are returned by Parse for the caller to log,
// as Kafka logs them; they are not errors. Known properties that Gregor
// accepts without acting on them are listed by Broker.UnsupportedSettings
// for start-up to name; docs/configuration.md (SettingsTable) lists every
// property as honoured or not supported. Unknown topic configs are
// errors, as in Kafka (INVALID_CONFIG).
//
// # Where Gregor's defaults differ from Kafka's
//
// Kafka has no usable default for the settings that make a KRaft node; its
// shipped config/server.properties provides them. Gregor's defaults make a
// complete single-node cluster with no file at all:
//
//	property                   Kafka 4.2            Gregor
//	process.roles              (required)           broker,controller
//	node.id                    (required)           1
//	controller.quorum.voters   (empty)              1@localhost:9093 (unless
//	                                                controller.quorum.bootstrap.servers is set)
//	controller.listener.names  (required)           CONTROLLER
//	listeners                  PLAINTEXT://:9092    PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
//	log.dir                    /tmp/kafka-logs      ./data
//
// Every other default is Kafka's, including the replication factor 3 of
// __consumer_offsets and __transaction_state (see DevProperties for the
// single-node values Kafka's shipped server.properties uses).
//
// cluster.id is a Gregor extension: Kafka takes the cluster id from
// kafka-storage format, Gregor from this property or a generated one.
package config
