// Package interbroker holds the requests this node sends to the other
// brokers as a broker: the connections to their inter-broker listeners
// (Clients), the transaction coordinator's markers to the partition
// leaders (MarkerSender, WriteTxnMarkers), and the partition leader's
// KIP-890 verifications at the transaction coordinators (AddSender,
// AddPartitionsToTxn). Each sender keeps its own connections.
package interbroker
