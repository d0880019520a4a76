// Package controller is Kafka's active controller over the metadata log:
// topic and partition creation and deletion, configs, broker
// registration, heartbeats and fencing, producer ID blocks, ISR and leader
// changes (AlterPartition, elections, preferred-leader rebalancing),
// partition reassignment and offline log dirs. A Controller validates each
// request against the newest image, proposes the records that carry it
// out through a raftnode.Node and waits until they apply; CreateTopics
// waits for its commit outside the request loop (pipeline.go), so that
// concurrent creations share the metadata log's fsync.
//
// It also holds the controller's rpcs, so that any node can reach the
// active controller: rpc.go is one table with an entry per call, sent by
// Client through one retry path (invoke) and served by Handlers on the
// raftnode transport. A call travels as the Kafka request it stands for,
// encoded by kmsg, where Kafka's messages carry it without loss
// (kafka.go), else in a codec driven by the Go values' shape (codec.go).
//
// It sits above raftnode and image and below package raftmeta, which
// starts a node with its controller.
package controller
