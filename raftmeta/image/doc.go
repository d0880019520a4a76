// Package image is the cluster metadata as data: the records of the
// metadata log (Kafka's metadata record types, with their binary
// encoding), the immutable Image that applying them builds, image
// snapshots, and the rules a record must meet to apply (topic names,
// replica sets, epochs).
//
// It is the bottom layer of raftmeta: it knows nothing of raft, disks,
// networks or the controller, so the broker reads images and the
// controller plans records without either depending on how the log is
// replicated. Only raftmeta/internal/compact, the shared encoding, is
// below it.
package image
