// Package compat is Gregor's compatibility suite: real Kafka clients
// against real gregor processes. It is its own module so that the
// clients are not dependencies of Gregor itself.
//
// TestClients builds cmd/gregor, starts two gregor processes per client
// (auto-create on, and off for the unknown-topic edge) and runs every
// scenario of harness.Scenarios for every client of harness.Clients:
// franz-go, sarama and kafka-go as Go code here; kcat by exec; the Python
// clients (python/*.py, run with Debian's /usr/bin/python3) and kafkajs
// (node/, pinned by its package-lock.json) as one script process per
// scenario that prints a JSON result line. Each (client, scenario) gets
// pass, fail with the reason, or n/a when the client has no API for it.
// Out-of-band checks with franz-go confirm what a client cannot see
// itself (the codec of the batches written, the producer id of an
// idempotent producer's batches, nothing appended after
// MESSAGE_TOO_LARGE).
//
// The run fails when a scenario that passes in expected.txt does not
// pass now; newly passing ones are logged, and make compat UPDATE=1
// records them. make compat writes docs/compatibility.md through
// cmd/compatdoc; make compat-peers runs other projects' own test suites
// through cmd/peers. Under go test -short (make test) only a quick subset
// runs, against a gregor built with the race detector when the suite is.
//
// One client or scenario runs with a -run pattern per level, client then
// scenario: go test -run 'TestClients/run/^kcat$/^group.split$' . (only
// the clients selected start gregor processes, and only what ran is
// compared with expected.txt).
//
// Flags (after -args): -compat.results, -compat.versions and
// -compat.update. Environment: GREGOR_BIN uses a prebuilt gregor;
// COMPAT_DEBUG passes librdkafka debug contexts to the confluent-kafka
// scripts.
package compat
