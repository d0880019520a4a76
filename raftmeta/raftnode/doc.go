// Package raftnode is one member of the metadata quorum's raft group (etcd
// raft): the Ready loop that owns the raft state machine, the metadata log
// and its snapshots on disk, the application of committed entries to the
// image (package image), membership (voters, learners, leadership
// transfer) and the TCP transport between nodes.
//
// The transport carries raft messages and, on separate connections,
// rpcs: a request is an API number and opaque bytes, answered by the
// RPCHandler the node's Config names for that number (the controller's
// calls, see package controller) or by the node itself (APIAddLearner).
// The node knows proposals only as records; what to propose is the
// controller's business, one layer up.
package raftnode
