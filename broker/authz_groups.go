package broker

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/security/authz"
)

// What Kafka's KafkaApis checks of the group APIs before the group
// coordinator sees them, and how it answers a principal that fails: READ
// on the group to join, sync, heartbeat, leave and commit; DESCRIBE to
// describe, fetch offsets and find the coordinator; DELETE to delete
// groups and offsets; READ (commit, offset delete) or DESCRIBE (fetch) on
// each topic. Each function returns nil when the request goes on to the
// coordinator.

// groupDenied is the GROUP_AUTHORIZATION_FAILED answer of a request about
// one group that needs op on it, or nil when it is allowed.
func (s *Server) groupDenied(r *request, op authz.Operation, groupID string) kmsg.Response {
	if s.auth(r).group(op, groupID) {
		return nil
	}
	code := kerr.GroupAuthorizationFailed.Code
	switch req := r.req.(type) {
	case *kmsg.JoinGroupRequest:
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation, resp.LeaderID, resp.MemberID = code, -1, "", ""
		if req.Version < 7 {
			empty := ""
			resp.Protocol = &empty
		}
		return resp
	case *kmsg.SyncGroupRequest:
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.HeartbeatRequest:
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.LeaveGroupRequest:
		resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.ConsumerGroupHeartbeatRequest:
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = code
		msg := kerr.GroupAuthorizationFailed.Description
		resp.ErrorMessage = &msg
		return resp
	case *kmsg.StreamsGroupHeartbeatRequest:
		resp := req.ResponseKind().(*kmsg.StreamsGroupHeartbeatResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.OffsetCommitRequest:
		// OffsetCommitRequest.getErrorResponse: every partition.
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.OffsetDeleteRequest:
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = code
		return resp
	}
	panic("groupDenied: no answer for " + kmsg.NameForKey(r.req.Key()))
}

// deniedTopics returns the topics of names the principal may not perform
// op on, nil when it may all (always, without an authorizer).
func (c authCheck) deniedTopics(op authz.Operation, names []string) map[string]bool {
	if !c.enabled() {
		return nil
	}
	var out map[string]bool
	for _, n := range names {
		if !c.topic(op, n) {
			if out == nil {
				out = map[string]bool{}
			}
			out[n] = true
		}
	}
	return out
}

// authorizeDescribeGroups answers the groups the principal may not
// DESCRIBE with GROUP_AUTHORIZATION_FAILED and returns the request for the
// others, and a function that completes the coordinator's answer: the
// denied groups added, and KIP-430's authorized operations of each group
// described when asked for (v3+).
func (s *Server) authorizeDescribeGroups(r *request, req *kmsg.DescribeGroupsRequest) (*kmsg.DescribeGroupsRequest, func(*kmsg.DescribeGroupsResponse)) {
	ac := s.auth(r)
	if !ac.enabled() {
		return req, func(*kmsg.DescribeGroupsResponse) {}
	}
	sub := *req
	sub.Groups = nil
	var denied []string
	for _, g := range req.Groups {
		if ac.group(authz.OpDescribe, g) {
			sub.Groups = append(sub.Groups, g)
		} else {
			denied = append(denied, g)
		}
	}
	return &sub, func(resp *kmsg.DescribeGroupsResponse) {
		if req.Version >= 3 && req.IncludeAuthorizedOperations {
			for i := range resp.Groups {
				if g := &resp.Groups[i]; g.ErrorCode == 0 {
					g.AuthorizedOperations = ac.operations(authz.ResourceGroup, g.Group, authz.GroupOperations)
				}
			}
		}
		for _, g := range denied {
			dg := kmsg.NewDescribeGroupsResponseGroup()
			dg.Group, dg.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
			dg.AuthorizedOperations = authorizedOpsNotRequested
			resp.Groups = append(resp.Groups, dg)
		}
	}
}

// authorizeConsumerGroupDescribe is authorizeDescribeGroups for KIP-848's
// ConsumerGroupDescribe.
func (s *Server) authorizeConsumerGroupDescribe(r *request, req *kmsg.ConsumerGroupDescribeRequest) (*kmsg.ConsumerGroupDescribeRequest, func(*kmsg.ConsumerGroupDescribeResponse)) {
	ac := s.auth(r)
	if !ac.enabled() {
		return req, func(*kmsg.ConsumerGroupDescribeResponse) {}
	}
	sub := *req
	sub.Groups = nil
	var denied []string
	for _, g := range req.Groups {
		if ac.group(authz.OpDescribe, g) {
			sub.Groups = append(sub.Groups, g)
		} else {
			denied = append(denied, g)
		}
	}
	return &sub, func(resp *kmsg.ConsumerGroupDescribeResponse) {
		if req.IncludeAuthorizedOperations {
			for i := range resp.Groups {
				if g := &resp.Groups[i]; g.ErrorCode == 0 {
					g.AuthorizedOperations = ac.operations(authz.ResourceGroup, g.Group, authz.GroupOperations)
				}
			}
		}
		// Kafka lists the denied groups first, then the coordinator's.
		var groups []kmsg.ConsumerGroupDescribeResponseGroup
		for _, g := range denied {
			dg := kmsg.NewConsumerGroupDescribeResponseGroup()
			dg.Group, dg.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
			dg.AuthorizedOperations = authorizedOpsNotRequested
			groups = append(groups, dg)
		}
		resp.Groups = append(groups, resp.Groups...)
		hideUndescribableAssignments(ac, resp)
	}
}

// hideUndescribableAssignments replaces each described group one of whose
// members is assigned, or is to be assigned, a topic the principal may
// not DESCRIBE by a TOPIC_AUTHORIZATION_FAILED answer without members, as
// Kafka 4.2's handleConsumerGroupDescribe does: the members' assignments
// would otherwise name topics the principal may not learn of.
func hideUndescribableAssignments(ac authCheck, resp *kmsg.ConsumerGroupDescribeResponse) {
	describable := map[string]bool{}
	denied := func(topic string) bool {
		ok, seen := describable[topic]
		if !seen {
			ok = ac.topic(authz.OpDescribe, topic)
			describable[topic] = ok
		}
		return !ok
	}
	for i, g := range resp.Groups {
		hidden := false
		for _, m := range g.Members {
			for _, tp := range m.Assignment.TopicPartitions {
				hidden = denied(tp.Topic) || hidden
			}
			for _, tp := range m.TargetAssignment.TopicPartitions {
				hidden = denied(tp.Topic) || hidden
			}
		}
		if hidden {
			hg := kmsg.NewConsumerGroupDescribeResponseGroup()
			hg.Group, hg.ErrorCode = g.Group, kerr.TopicAuthorizationFailed.Code
			hg.ErrorMessage = kmsg.StringPtr("The group has described topic(s) that the client is not authorized to describe.")
			hg.Members = []kmsg.ConsumerGroupDescribeResponseGroupMember{}
			resp.Groups[i] = hg
		}
	}
}

// consumerSubscriptionDenied is Kafka 4.2's check of a
// ConsumerGroupHeartbeat's subscribed topic names, after READ on the
// group: unless the principal may DESCRIBE every topic named, the
// heartbeat answers TOPIC_AUTHORIZATION_FAILED (without a message, as
// Kafka) and the coordinator never sees it, so a member cannot learn of a
// topic by subscribing to it. nil when the heartbeat goes on.
func (s *Server) consumerSubscriptionDenied(r *request, req *kmsg.ConsumerGroupHeartbeatRequest) kmsg.Response {
	if len(req.SubscribedTopicNames) == 0 {
		return nil
	}
	if len(s.auth(r).deniedTopics(authz.OpDescribe, req.SubscribedTopicNames)) == 0 {
		return nil
	}
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	resp.ErrorCode = kerr.TopicAuthorizationFailed.Code
	return resp
}

// filterListedGroups keeps, unless the principal may DESCRIBE the
// cluster, only the groups it may DESCRIBE.
func (s *Server) filterListedGroups(r *request, resp *kmsg.ListGroupsResponse) {
	ac := s.auth(r)
	if !ac.enabled() || ac.cluster(authz.OpDescribe) {
		return
	}
	resp.Groups = slices.DeleteFunc(resp.Groups, func(g kmsg.ListGroupsResponseGroup) bool {
		return !ac.group(authz.OpDescribe, g.Group)
	})
}

// authorizeDeleteGroups splits the request into the groups the principal
// may DELETE and a function adding the others to the answer with
// GROUP_AUTHORIZATION_FAILED.
func (s *Server) authorizeDeleteGroups(r *request, req *kmsg.DeleteGroupsRequest) (*kmsg.DeleteGroupsRequest, func(*kmsg.DeleteGroupsResponse)) {
	ac := s.auth(r)
	if !ac.enabled() {
		return req, func(*kmsg.DeleteGroupsResponse) {}
	}
	sub := *req
	sub.Groups = nil
	var denied []string
	for _, g := range req.Groups {
		if ac.group(authz.OpDelete, g) {
			sub.Groups = append(sub.Groups, g)
		} else if !slices.Contains(denied, g) {
			denied = append(denied, g)
		}
	}
	return &sub, func(resp *kmsg.DeleteGroupsResponse) {
		for _, g := range denied {
			dg := kmsg.NewDeleteGroupsResponseGroup()
			dg.Group, dg.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, dg)
		}
	}
}

// authorizeOffsetFetch applies KafkaApis' OffsetFetch checks: a group the
// principal may not DESCRIBE answers GROUP_AUTHORIZATION_FAILED; of a
// group's named topics, those it may not DESCRIBE answer
// TOPIC_AUTHORIZATION_FAILED without asking the coordinator; of all
// topics (a null list), those it may not DESCRIBE are left out. It
// returns the whole answer when the coordinator is not to be asked,
// else the request for it and a function that completes its answer.
func (s *Server) authorizeOffsetFetch(r *request, req *kmsg.OffsetFetchRequest) (kmsg.Response, *kmsg.OffsetFetchRequest, func(*kmsg.OffsetFetchResponse)) {
	ac := s.auth(r)
	if !ac.enabled() {
		return nil, req, func(*kmsg.OffsetFetchResponse) {}
	}
	deniedPartitions := func(topic string, parts []int32) []kmsg.OffsetFetchResponseGroupTopicPartition {
		var out []kmsg.OffsetFetchResponseGroupTopicPartition
		for _, p := range parts {
			rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = p, -1, -1, kerr.TopicAuthorizationFailed.Code
			out = append(out, rp)
		}
		return out
	}
	if req.Version < 8 {
		if !ac.group(authz.OpDescribe, req.Group) {
			resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
			resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
			if req.Version < 2 {
				// No top-level error before v2: every partition.
				for _, t := range req.Topics {
					rt := kmsg.NewOffsetFetchResponseTopic()
					rt.Topic = t.Topic
					for _, p := range t.Partitions {
						rp := kmsg.NewOffsetFetchResponseTopicPartition()
						rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = p, -1, -1, resp.ErrorCode
						rt.Partitions = append(rt.Partitions, rp)
					}
					resp.Topics = append(resp.Topics, rt)
				}
			}
			return resp, nil, nil
		}
		sub := *req
		var denied []kmsg.OffsetFetchRequestTopic
		if req.Topics != nil {
			sub.Topics = []kmsg.OffsetFetchRequestTopic{}
			for _, t := range req.Topics {
				if ac.topic(authz.OpDescribe, t.Topic) {
					sub.Topics = append(sub.Topics, t)
				} else {
					denied = append(denied, t)
				}
			}
		}
		return nil, &sub, func(resp *kmsg.OffsetFetchResponse) {
			if resp.ErrorCode != 0 {
				return
			}
			if req.Topics == nil {
				resp.Topics = slices.DeleteFunc(resp.Topics, func(t kmsg.OffsetFetchResponseTopic) bool {
					return !ac.topic(authz.OpDescribe, t.Topic)
				})
				return
			}
			for _, t := range denied {
				rt := kmsg.NewOffsetFetchResponseTopic()
				rt.Topic = t.Topic
				for _, gp := range deniedPartitions(t.Topic, t.Partitions) {
					rp := kmsg.NewOffsetFetchResponseTopicPartition()
					rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = gp.Partition, gp.Offset, gp.LeaderEpoch, gp.ErrorCode
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
		}
	}
	// v8+: several groups, each answered on its own.
	sub := *req
	sub.Groups = nil
	type groupPlan struct {
		denied       bool
		deniedTopics []kmsg.OffsetFetchRequestGroupTopic
	}
	plans := make([]groupPlan, len(req.Groups))
	for i, g := range req.Groups {
		if !ac.group(authz.OpDescribe, g.Group) {
			plans[i].denied = true
			continue
		}
		sg := g
		if g.Topics != nil {
			sg.Topics = []kmsg.OffsetFetchRequestGroupTopic{}
			for _, t := range g.Topics {
				if ac.topic(authz.OpDescribe, t.Topic) {
					sg.Topics = append(sg.Topics, t)
				} else {
					plans[i].deniedTopics = append(plans[i].deniedTopics, t)
				}
			}
		}
		sub.Groups = append(sub.Groups, sg)
	}
	finish := func(resp *kmsg.OffsetFetchResponse) {
		answered := resp.Groups
		resp.Groups = nil
		next := 0
		for i, g := range req.Groups {
			if plans[i].denied {
				rg := kmsg.NewOffsetFetchResponseGroup()
				rg.Group, rg.ErrorCode = g.Group, kerr.GroupAuthorizationFailed.Code
				resp.Groups = append(resp.Groups, rg)
				continue
			}
			if next >= len(answered) {
				break
			}
			rg := answered[next]
			next++
			if rg.ErrorCode == 0 {
				if g.Topics == nil {
					rg.Topics = slices.DeleteFunc(rg.Topics, func(t kmsg.OffsetFetchResponseGroupTopic) bool {
						return !ac.topic(authz.OpDescribe, t.Topic)
					})
				}
				for _, t := range plans[i].deniedTopics {
					rt := kmsg.NewOffsetFetchResponseGroupTopic()
					rt.Topic, rt.Partitions = t.Topic, deniedPartitions(t.Topic, t.Partitions)
					rg.Topics = append(rg.Topics, rt)
				}
			}
			resp.Groups = append(resp.Groups, rg)
		}
	}
	if len(sub.Groups) == 0 {
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		finish(resp)
		return resp, nil, nil
	}
	return nil, &sub, finish
}
