package broker

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/security/authz"
)

// StreamsGroupDescribe (key 89), versions 0-1: the topology, members,
// epochs and task assignments of streams groups (KIP-1071). v1's
// IncludeTopologyDescription (KIP-1331) answers NOT_STORED: Gregor has no
// topology description plugin. DESCRIBE on each group, as Kafka's
// KafkaApis; the denied groups come first with GROUP_AUTHORIZATION_FAILED.
func init() { register(89, 0, 1, handleStreamsGroupDescribe) }

func handleStreamsGroupDescribe(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.StreamsGroupDescribeRequest)
	ac := s.auth(r)
	resp := req.ResponseKind().(*kmsg.StreamsGroupDescribeResponse)
	if !s.streamsProtocolEnabled() {
		for _, g := range req.Groups {
			dg := kmsg.NewStreamsGroupDescribeResponseGroup()
			dg.Group, dg.ErrorCode = g, kerr.UnsupportedVersion.Code
			resp.Groups = append(resp.Groups, dg)
		}
		return respond(resp)
	}
	var allowed []string
	for _, g := range req.Groups {
		if ac.group(authz.OpDescribe, g) {
			allowed = append(allowed, g)
			continue
		}
		dg := kmsg.NewStreamsGroupDescribeResponseGroup()
		dg.Group, dg.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
		resp.Groups = append(resp.Groups, dg)
	}
	return r.inOrder(func() kmsg.Response {
		described := s.groups.coord.StreamsGroupDescribe(r.conn.ctx, allowed, req.Version, req.IncludeTopologyDescription)()
		for _, d := range described {
			if d.ErrorCode == 0 && !topologyTopicsDescribable(ac, d.Topology) {
				// As Kafka's KafkaApis: clients may not see topics they
				// may not DESCRIBE, so such a group is answered with
				// none of its topology or members.
				g := kmsg.NewStreamsGroupDescribeResponseGroup()
				g.Group, g.ErrorCode = d.Group, kerr.TopicAuthorizationFailed.Code
				g.ErrorMessage = kmsg.StringPtr("The described group uses topics that the client is not authorized to describe.")
				resp.Groups = append(resp.Groups, g)
				continue
			}
			if req.IncludeAuthorizedOperations && d.ErrorCode == 0 {
				d.AuthorizedOperations = ac.operations(authz.ResourceGroup, d.Group, authz.GroupOperations)
			}
			resp.Groups = append(resp.Groups, d)
		}
		return resp
	})
}

// topologyTopicsDescribable reports whether the principal may DESCRIBE
// every topic the topology names: its source and repartition sink topics,
// its repartition source and changelog topics.
func topologyTopicsDescribable(ac authCheck, t *kmsg.StreamsGroupDescribeResponseGroupTopology) bool {
	if t == nil || !ac.enabled() {
		return true
	}
	for _, st := range t.Subtopologies {
		names := append(slices.Clone(st.SourceTopics), st.RepartitionSinkTopics...)
		for _, ti := range append(slices.Clone(st.RepartitionSourceTopics), st.StateChangelogTopics...) {
			names = append(names, ti.Topic)
		}
		for _, n := range names {
			if !ac.topic(authz.OpDescribe, n) {
				return false
			}
		}
	}
	return true
}
