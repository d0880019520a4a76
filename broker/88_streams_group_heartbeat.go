package broker

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/broker/group"
	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/raftmeta/controller"
	"github.com/gregorbroker/gregor/raftmeta/image"
	"github.com/gregorbroker/gregor/security/authz"
)

// StreamsGroupHeartbeat (key 88), versions 0-1: the Kafka Streams
// rebalance protocol (KIP-1071) as Kafka 4.2+ serves it (v1 adds
// AcceptableRecoveryLag as an int64 and TopologyDescriptionRequired, which
// Gregor never sets: it stores no topology descriptions). The coordinator
// keeps the topology the first member brings, assigns tasks with the sticky
// assignor and reconciles members revoke-before-assign; the broker creates
// the repartition and changelog topics it reports missing through the
// controller, as Kafka's AutoTopicCreationManager, and the streams.version
// feature is finalized at 1. Before the coordinator, as Kafka's KafkaApis:
// READ on the group, then, for a topology, no internal or invalid topic
// names (STREAMS_INVALID_TOPOLOGY) and DESCRIBE on every topic it names.
func init() { register(88, 0, 1, handleStreamsGroupHeartbeat) }

func handleStreamsGroupHeartbeat(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.StreamsGroupHeartbeatRequest)
	if !s.streamsProtocolEnabled() {
		resp := req.ResponseKind().(*kmsg.StreamsGroupHeartbeatResponse)
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		return respond(resp)
	}
	if denied := s.groupDenied(r, authz.OpRead, req.Group); denied != nil {
		return respond(denied)
	}
	if resp := s.streamsTopologyRefused(r, req); resp != nil {
		return respond(resp)
	}
	return r.inOrder(func() kmsg.Response {
		if req.MemberEpoch == 0 && s.shares.coord.IsShareGroup(r.conn.ctx, req.Group) {
			resp := req.ResponseKind().(*kmsg.StreamsGroupHeartbeatResponse)
			resp.ErrorCode = kerr.GroupIDNotFound.Code
			resp.ErrorMessage = kmsg.StringPtr("Group " + req.Group + " is not a streams group.")
			return resp
		}
		res := s.groups.coord.StreamsGroupHeartbeat(r.conn.ctx, r.clientInfo(), req)()
		if len(res.CreateTopics) > 0 && res.Response.ErrorCode == 0 {
			s.createStreamsInternalTopics(r, res)
		}
		return res.Response
	})
}

// streamsProtocolEnabled is Kafka's isStreamsGroupProtocolEnabled: streams
// among group.coordinator.rebalance.protocols (streams.version is always
// finalized at 1 here).
func (s *Server) streamsProtocolEnabled() bool {
	return slices.Contains(s.cfg.GroupCoordinatorRebalanceProtocols, "streams")
}

// streamsTopologyRefused checks the topics a joining member's topology
// names, as KafkaApis.handleStreamsGroupHeartbeat: nil when the heartbeat
// goes on to the coordinator.
func (s *Server) streamsTopologyRefused(r *request, req *kmsg.StreamsGroupHeartbeatRequest) kmsg.Response {
	if req.Topology == nil {
		return nil
	}
	var required []string
	for _, st := range req.Topology.Subtopologies {
		required = append(required, st.SourceTopics...)
		required = append(required, st.RepartitionSinkTopics...)
		for _, t := range st.RepartitionSourceTopics {
			required = append(required, t.Topic)
		}
		for _, t := range st.StateChangelogTopics {
			required = append(required, t.Topic)
		}
	}
	// Distinct, in first-seen order, as Scala's distinct.
	seen := map[string]bool{}
	required = slices.DeleteFunc(required, func(n string) bool {
		dup := seen[n]
		seen[n] = true
		return dup
	})
	fail := func(code int16, msg string) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.StreamsGroupHeartbeatResponse)
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return resp
	}
	var internal, invalid []string
	for _, n := range required {
		if isInternalTopic(n) {
			internal = append(internal, n)
		}
		if image.ValidateTopicName(n) != nil {
			invalid = append(invalid, n)
		}
	}
	if len(internal) > 0 {
		return fail(kerr.StreamsInvalidTopology.Code, fmt.Sprintf("Use of Kafka internal topics %s in a Kafka Streams topology is prohibited.", strings.Join(internal, ",")))
	}
	if len(invalid) > 0 {
		return fail(kerr.StreamsInvalidTopology.Code, fmt.Sprintf("Topic names %s are not valid topic names.", strings.Join(invalid, ",")))
	}
	if len(s.auth(r).deniedTopics(authz.OpDescribe, required)) > 0 {
		return fail(kerr.TopicAuthorizationFailed.Code, "")
	}
	return nil
}

// createStreamsInternalTopics creates the internal topics a heartbeat
// reported missing, as Kafka's AutoTopicCreationManager: the principal
// must may CREATE on the cluster or on each topic, or the
// MISSING_INTERNAL_TOPICS status says which it may not. Gregor creates
// them before answering, so a creation failure is in the same status's
// detail; topics created by another member meanwhile are no failure.
func (s *Server) createStreamsInternalTopics(r *request, res group.StreamsHeartbeatResult) {
	resp := res.Response
	status := func() *kmsg.StreamsGroupHeartbeatResponseStatus {
		for i := range resp.Status {
			if resp.Status[i].StatusCode == 3 { // MISSING_INTERNAL_TOPICS
				return &resp.Status[i]
			}
		}
		st := kmsg.NewStreamsGroupHeartbeatResponseStatus()
		st.StatusCode = 3
		resp.Status = append(resp.Status, st)
		return &resp.Status[len(resp.Status)-1]
	}
	appendDetail := func(detail string) {
		st := status()
		if st.StatusDetail == "" {
			st.StatusDetail = detail
		} else {
			st.StatusDetail += "; " + detail
		}
	}
	ac := s.auth(r)
	if ac.enabled() && !ac.cluster(authz.OpCreate) {
		var names []string
		for _, t := range res.CreateTopics {
			names = append(names, t.Name)
		}
		if denied := ac.deniedTopics(authz.OpCreate, names); len(denied) > 0 {
			var list []string
			for _, n := range names {
				if denied[n] {
					list = append(list, n)
				}
			}
			appendDetail("Unauthorized to CREATE on topics " + strings.Join(list, ", ") + ".")
			return
		}
	}
	var specs []controller.CreateTopic
	var failed []string
	for _, t := range res.CreateTopics {
		if err := config.ValidateTopicConfigs(t.Configs); err != nil {
			failed = append(failed, fmt.Sprintf("%s (%s)", t.Name, err))
			continue
		}
		rf := t.ReplicationFactor
		if rf <= 0 {
			rf = s.cfg.DefaultReplicationFactor
		}
		specs = append(specs, controller.CreateTopic{Name: t.Name, NumPartitions: t.Partitions, ReplicationFactor: rf, Configs: t.Configs})
	}
	if len(specs) > 0 {
		ctx, cancel := context.WithTimeout(r.conn.ctx, 10*time.Second)
		defer cancel()
		for _, cr := range s.ctrl.CreateTopics(ctx, specs, false) {
			switch {
			case cr.Err == nil:
				s.log.Info("created streams internal topic", "topic", cr.Name, "partitions", cr.NumPartitions, "group", r.req.(*kmsg.StreamsGroupHeartbeatRequest).Group)
			case errCode(cr.Err) == kerr.TopicAlreadyExists.Code:
			default:
				failed = append(failed, fmt.Sprintf("%s (%s)", cr.Name, cr.Err))
			}
		}
		if err := s.reconcile(s.meta.Image()); err != nil {
			s.log.Error("apply metadata", "err", err)
		}
	}
	if len(failed) > 0 {
		appendDetail("Creation failed: " + strings.Join(failed, ", ") + ".")
	}
}
