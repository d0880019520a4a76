// Package replica is replication's follower side. For each leader it
// follows partitions of, this node runs one fetcher goroutine that fetches
// from the leader with the Fetch API and its replica id, as Kafka's replica
// fetcher threads do. After becoming a follower a partition first
// truncates a divergent tail: it asks the leader, with
// OffsetForLeaderEpoch, where its own last leader epoch ended there, and
// cuts its log at that offset (KIP-101/279). The leader's side is
// broker/replication.go and the Fetch handler.
//
// On a PLAINTEXT inter-broker listener a fetcher has a connection of its
// own to its leader (conn.go): it writes each request and reads the
// response on its goroutine into a buffer it reuses, waiting for the rest
// of a large one with SO_RCVLOWAT so that it wakes once, not per loopback
// segment. With TLS or SASL it goes through a franz-go client, which
// negotiates them.
package replica
