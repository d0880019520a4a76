package broker

import (
	"net"

	"github.com/gregorbroker/gregor/broker/group"
)

// The group APIs hand the request to the group coordinator (broker/group)
// and answer in the background phase, in connection order (serial.go): a
// JoinGroup waits for the rebalance, a commit for its append to
// __consumer_offsets. Each file 08_offset_commit.go ...
// 69_consumer_group_describe.go registers its versions and says what it
// serves.

// clientInfo describes the connection as DescribeGroups shows members.
func (r *request) clientInfo() group.ClientInfo {
	ci := group.ClientInfo{}
	if r.hdr.ClientID != nil {
		ci.ClientID = *r.hdr.ClientID
	}
	if host, _, err := net.SplitHostPort(r.conn.nc.RemoteAddr().String()); err == nil {
		ci.ClientHost = "/" + host
	}
	return ci
}
