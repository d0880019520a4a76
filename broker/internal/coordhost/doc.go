// Package coordhost hosts the group and transaction coordinators on the
// partitions of their internal topics (__consumer_offsets,
// __transaction_state): a coordinator's state is loaded from a partition
// when this node becomes its leader and unloaded when it stops leading it
// (Loader), replaying the partition's log (ReadLog).
package coordhost
