// Package partition is a partition this node hosts: its log, its
// assignment (replicas, ISR, leader and epochs) and what the leader knows
// of its followers, the high watermark and the fetches and produces
// waiting for it, the append path (leadership check under the lock,
// leader epoch cache, flush policy), the producer state of idempotent and
// transactional producers with its snapshots, and the last stable offset.
// What it needs of the server that hosts it comes in an Env. The broker
// package applies metadata to partitions, serves them to clients and
// followers, and runs replication between brokers.
package partition
