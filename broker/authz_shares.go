package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/security/authz"
)

// What Kafka's KafkaApis checks of the share-group APIs (KIP-932) before
// the group coordinator or the share partitions see them: READ on the
// group to heartbeat, fetch, acknowledge and alter offsets; DESCRIBE to
// describe the group and its offsets; DELETE to delete offsets; DESCRIBE
// on the topics a member subscribes to and on those described; READ on
// the topics fetched, acknowledged, altered or deleted.

// Kafka's Errors messages, which the share-offset APIs put in their
// answers (kerr's descriptions are worded otherwise).
const (
	topicAuthzMessage = "Topic authorization failed."
	groupAuthzMessage = "Group authorization failed."
)

// shareGroupDenied is the GROUP_AUTHORIZATION_FAILED answer of a share
// request about one group that needs op on it (each request's
// getErrorResponse), or nil when it is allowed.
func (s *Server) shareGroupDenied(r *request, op authz.Operation, groupID string) kmsg.Response {
	if s.auth(r).group(op, groupID) {
		return nil
	}
	code := kerr.GroupAuthorizationFailed.Code
	switch req := r.req.(type) {
	case *kmsg.ShareGroupHeartbeatRequest:
		resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.ShareFetchRequest:
		resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.ShareAcknowledgeRequest:
		resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.AlterShareGroupOffsetsRequest:
		resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
		resp.ErrorCode, resp.ErrorMessage = code, kmsg.StringPtr(groupAuthzMessage)
		return resp
	case *kmsg.DeleteShareGroupOffsetsRequest:
		resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
		resp.ErrorCode, resp.ErrorMessage = code, kmsg.StringPtr(groupAuthzMessage)
		return resp
	}
	panic("shareGroupDenied: no answer for " + kmsg.NameForKey(r.req.Key()))
}

// shareSubscriptionDenied is Kafka's answer to a ShareGroupHeartbeat that
// subscribes to a topic the principal may not DESCRIBE: the whole
// heartbeat fails with TOPIC_AUTHORIZATION_FAILED, so that a client
// cannot learn of topics it may not see through its assignment. nil when
// every topic named is allowed (or none is named: the subscription is
// unchanged).
func (s *Server) shareSubscriptionDenied(r *request, req *kmsg.ShareGroupHeartbeatRequest) kmsg.Response {
	if len(req.SubscribedTopicNames) == 0 {
		return nil
	}
	if len(s.auth(r).deniedTopics(authz.OpDescribe, req.SubscribedTopicNames)) == 0 {
		return nil
	}
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	resp.ErrorCode = kerr.TopicAuthorizationFailed.Code
	return resp
}

// shareReadable is the predicate the share coordinator asks, for
// ShareFetch and ShareAcknowledge, whether the principal may READ a
// topic; nil without an authorizer (everything is readable).
func (s *Server) shareReadable(r *request) func(string) bool {
	ac := s.auth(r)
	if !ac.enabled() {
		return nil
	}
	return func(topic string) bool { return ac.topic(authz.OpRead, topic) }
}

// authorizeShareGroupDescribe answers the groups the principal may not
// DESCRIBE with GROUP_AUTHORIZATION_FAILED (first, as Kafka) and returns
// the request for the others, and a function that completes the
// coordinator's answer: KIP-430's operations of each group described when
// asked for, and a group whose members are assigned a topic the principal
// may not DESCRIBE replaced by TOPIC_AUTHORIZATION_FAILED without members.
func (s *Server) authorizeShareGroupDescribe(r *request, req *kmsg.ShareGroupDescribeRequest) (*kmsg.ShareGroupDescribeRequest, func(*kmsg.ShareGroupDescribeResponse)) {
	ac := s.auth(r)
	if !ac.enabled() {
		return req, func(*kmsg.ShareGroupDescribeResponse) {}
	}
	sub := *req
	sub.GroupIDs = nil
	var denied []kmsg.ShareGroupDescribeResponseGroup
	for _, g := range req.GroupIDs {
		if ac.group(authz.OpDescribe, g) {
			sub.GroupIDs = append(sub.GroupIDs, g)
			continue
		}
		dg := kmsg.NewShareGroupDescribeResponseGroup()
		dg.GroupID, dg.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
		denied = append(denied, dg)
	}
	return &sub, func(resp *kmsg.ShareGroupDescribeResponse) {
		if req.IncludeAuthorizedOperations {
			for i := range resp.Groups {
				if g := &resp.Groups[i]; g.ErrorCode == 0 {
					g.AuthorizedOperations = ac.operations(authz.ResourceGroup, g.GroupID, authz.GroupOperations)
				}
			}
		}
		resp.Groups = append(denied, resp.Groups...)
		describable := map[string]bool{}
		for i, g := range resp.Groups {
			hidden := false
			for _, m := range g.Members {
				for _, tp := range m.Assignment.TopicPartitions {
					ok, seen := describable[tp.Topic]
					if !seen {
						ok = ac.topic(authz.OpDescribe, tp.Topic)
						describable[tp.Topic] = ok
					}
					hidden = hidden || !ok
				}
			}
			if hidden {
				hg := kmsg.NewShareGroupDescribeResponseGroup()
				hg.GroupID, hg.ErrorCode = g.GroupID, kerr.TopicAuthorizationFailed.Code
				hg.ErrorMessage = kmsg.StringPtr("The group has described topic(s) that the client is not authorized to describe.")
				hg.Members = []kmsg.ShareGroupDescribeResponseGroupMember{}
				resp.Groups[i] = hg
			}
		}
	}
}

// authorizeDescribeShareGroupOffsets applies KafkaApis' checks of
// DescribeShareGroupOffsets, group by group: a group the principal may
// not DESCRIBE answers GROUP_AUTHORIZATION_FAILED; of its named topics,
// those it may not DESCRIBE answer TOPIC_AUTHORIZATION_FAILED per
// partition without asking the coordinator; of all topics (a null list),
// those it may not DESCRIBE are left out. It returns the request for the
// coordinator (nil when no group is left to ask) and a function that
// builds the answer from the coordinator's.
func (s *Server) authorizeDescribeShareGroupOffsets(r *request, req *kmsg.DescribeShareGroupOffsetsRequest) (*kmsg.DescribeShareGroupOffsetsRequest, func(*kmsg.DescribeShareGroupOffsetsResponse) *kmsg.DescribeShareGroupOffsetsResponse) {
	ac := s.auth(r)
	if !ac.enabled() {
		return req, func(resp *kmsg.DescribeShareGroupOffsetsResponse) *kmsg.DescribeShareGroupOffsetsResponse {
			return resp
		}
	}
	type plan struct {
		denied       bool
		deniedTopics []kmsg.DescribeShareGroupOffsetsRequestGroupTopic
	}
	plans := make([]plan, len(req.Groups))
	sub := *req
	sub.Groups = nil
	for i, g := range req.Groups {
		if !ac.group(authz.OpDescribe, g.GroupID) {
			plans[i].denied = true
			continue
		}
		sg := g
		if g.Topics != nil {
			sg.Topics = []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{}
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
	finish := func(resp *kmsg.DescribeShareGroupOffsetsResponse) *kmsg.DescribeShareGroupOffsetsResponse {
		if resp == nil {
			resp = req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
		}
		answered := resp.Groups
		resp.Groups = nil
		next := 0
		for i, g := range req.Groups {
			if plans[i].denied {
				rg := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
				rg.GroupID, rg.ErrorCode = g.GroupID, kerr.GroupAuthorizationFailed.Code
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
					kept := rg.Topics[:0]
					for _, t := range rg.Topics {
						if ac.topic(authz.OpDescribe, t.Topic) {
							kept = append(kept, t)
						}
					}
					rg.Topics = kept
				}
				for _, t := range plans[i].deniedTopics {
					rt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
					rt.Topic = t.Topic // and a zero topic id: the principal may not learn it
					for _, p := range t.Partitions {
						rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
						rp.Partition, rp.StartOffset = p, -1
						rp.ErrorCode, rp.ErrorMessage = kerr.TopicAuthorizationFailed.Code, kmsg.StringPtr(topicAuthzMessage)
						rt.Partitions = append(rt.Partitions, rp)
					}
					rg.Topics = append(rg.Topics, rt)
				}
			}
			resp.Groups = append(resp.Groups, rg)
		}
		return resp
	}
	if len(sub.Groups) == 0 {
		return nil, finish
	}
	return &sub, finish
}

// authorizeAlterShareGroupOffsets splits AlterShareGroupOffsets' topics
// into those the principal may READ, for the coordinator, and a function
// completing its answer with the others' partitions, each
// TOPIC_AUTHORIZATION_FAILED (first, as Kafka's response builder), unless
// the coordinator answered a group-level error.
func (s *Server) authorizeAlterShareGroupOffsets(r *request, req *kmsg.AlterShareGroupOffsetsRequest) (*kmsg.AlterShareGroupOffsetsRequest, func(*kmsg.AlterShareGroupOffsetsResponse)) {
	ac := s.auth(r)
	if !ac.enabled() {
		return req, func(*kmsg.AlterShareGroupOffsetsResponse) {}
	}
	sub := *req
	sub.Topics = []kmsg.AlterShareGroupOffsetsRequestTopic{}
	var denied []kmsg.AlterShareGroupOffsetsResponseTopic
	var ids map[string][16]byte
	for _, t := range req.Topics {
		if ac.topic(authz.OpRead, t.Topic) {
			sub.Topics = append(sub.Topics, t)
			continue
		}
		if ids == nil {
			ids = s.topicIDsByName()
		}
		rt := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, ids[t.Topic]
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode, rp.ErrorMessage = kerr.TopicAuthorizationFailed.Code, kmsg.StringPtr(topicAuthzMessage)
			rt.Partitions = append(rt.Partitions, rp)
		}
		denied = append(denied, rt)
	}
	return &sub, func(resp *kmsg.AlterShareGroupOffsetsResponse) {
		if resp.ErrorCode == 0 && len(denied) > 0 {
			resp.Topics = append(denied, resp.Topics...)
		}
	}
}

// authorizeDeleteShareGroupOffsets is authorizeAlterShareGroupOffsets for
// DeleteShareGroupOffsets, whose denied topics answer
// TOPIC_AUTHORIZATION_FAILED as a whole.
func (s *Server) authorizeDeleteShareGroupOffsets(r *request, req *kmsg.DeleteShareGroupOffsetsRequest) (*kmsg.DeleteShareGroupOffsetsRequest, func(*kmsg.DeleteShareGroupOffsetsResponse)) {
	ac := s.auth(r)
	if !ac.enabled() {
		return req, func(*kmsg.DeleteShareGroupOffsetsResponse) {}
	}
	sub := *req
	sub.Topics = []kmsg.DeleteShareGroupOffsetsRequestTopic{}
	var denied []kmsg.DeleteShareGroupOffsetsResponseTopic
	for _, t := range req.Topics {
		if ac.topic(authz.OpRead, t.Topic) {
			sub.Topics = append(sub.Topics, t)
			continue
		}
		rt := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		rt.Topic = t.Topic // and a zero topic id, as Kafka
		rt.ErrorCode, rt.ErrorMessage = kerr.TopicAuthorizationFailed.Code, kmsg.StringPtr(topicAuthzMessage)
		denied = append(denied, rt)
	}
	return &sub, func(resp *kmsg.DeleteShareGroupOffsetsResponse) {
		if resp.ErrorCode == 0 && len(denied) > 0 {
			resp.Topics = append(denied, resp.Topics...)
		}
	}
}

// topicIDsByName maps the image's topic names to ids.
func (s *Server) topicIDsByName() map[string][16]byte {
	img := s.meta.Image()
	out := map[string][16]byte{}
	for _, name := range img.TopicNames() {
		t, _ := img.Topic(name)
		out[name] = t.ID
	}
	return out
}
