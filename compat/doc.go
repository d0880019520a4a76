// Package compat is Gregor's compatibility suite: real Kafka clients
// against real gregor processes and, in the same run, against Apache
// Kafka itself as the reference. It is its own module so that the
// clients are not dependencies of Gregor itself.
//
// TestClients builds cmd/gregor and runs every scenario of
// harness.Scenarios for every client of harness.Clients on two targets.
// Gregor: two gregor processes per client (auto-create on, and off for
// the unknown-topic edge). Kafka: the Apache Kafka reference, two
// single-node KRaft brokers (auto-create on and off; the setting is a
// static broker config, so a second broker is the honest way) started
// once per run by kafka-ref/kafka-ref.sh from the jars java/pom.xml pins
// and shared by every client, whose topics and groups carry the client's
// name. The references boot while Gregor's half runs; then Kafka's half
// runs (one target at a time: the machines have two cores). Clients:
// franz-go, sarama and kafka-go as Go code here; kcat by exec; the
// Python clients (python/*.py, run with Debian's /usr/bin/python3) and
// kafkajs (node/, pinned by its package-lock.json) as one script process
// per scenario that prints a JSON result line; the Java client (one JVM
// per target). Each (target, client, scenario) gets pass, fail with the
// reason, or n/a when the client has no API for it. Out-of-band checks
// with franz-go confirm what a client cannot see itself (the codec of the
// batches written, the producer id of an idempotent producer's batches,
// nothing appended after MESSAGE_TOO_LARGE), on both targets alike.
//
// Three rules judge a run. A scenario that passes on Gregor in
// expected.txt and does not pass now fails the run (newly passing ones
// are logged; make compat UPDATE=1 records them). A scenario whose
// outcome on Gregor differs from its outcome on Kafka fails the run
// unless differences.txt lists it, as deliberate (Gregor differs on
// purpose) or as a gap (a known bug), with its reason. TestAPIVersions
// reads ApiVersions from a gregor and from the Kafka reference and fails
// on any key whose range differs without a line in api-differences.tsv:
// Gregor may serve fewer APIs or versions than Kafka only where listed
// with a reason.
//
// TestKafkaTools runs Kafka 4.4's own bin/kafka-*.sh tools against a
// gregor and a three-node gregor cluster (kafka-dump-log on gregor's data
// files), checking their output and the broker's state with franz-go.
//
// TestSecuredClients runs every client over one gregor's SASL_SSL
// (SCRAM-SHA-512) and mTLS listeners (gregor cert's certificates): 10
// keyed records produced and read back per cell, and a wrong password or
// a missing client certificate refused (python/secured_roundtrip.py,
// node/secured_roundtrip.js, java/secured/SecuredRoundTrip.java).
//
// make compat writes docs/compatibility.md through cmd/compatdoc (Kafka
// and Gregor side by side per client and scenario); make compat-peers
// runs other projects' own test suites through cmd/peers; make kafka-ref
// starts a reference by hand (KAFKA_REF_NODES=3 for a three-node
// cluster). Under go test -short (make test) only a quick subset runs,
// against Gregor only (no JVM), built with the race detector when the
// suite is.
//
// One target, client or scenario runs with a -run pattern per level,
// target then client then scenario: go test -run
// 'TestClients/run/gregor/^kcat$/^group.split$' . (only the clients
// selected start gregor processes, only what ran is compared with
// expected.txt and differences.txt; a run selecting only gregor still
// boots the references unless -compat.kafka=false).
//
// Flags (after -args): -compat.results, -compat.versions,
// -compat.kafka-versions, -compat.kafka (default true) and
// -compat.update. Environment: GREGOR_BIN uses a prebuilt gregor;
// COMPAT_DEBUG passes librdkafka debug contexts to the confluent-kafka
// scripts; KAFKA_HEAP_OPTS sizes the reference's heap.
package compat
