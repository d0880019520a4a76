package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/security/authz"
)

// DeleteTopics (key 20), versions 1-6 (Kafka 4's range).
//
// Topics are named by name (all versions) or, from v6, by id. The
// deletion commits to the metadata log before the answer; the partition
// logs are then renamed to `<topic>-<partition>.<id>-delete` and removed,
// as Kafka does. With delete.topic.enable=false every topic is answered
// TOPIC_DELETION_DISABLED (INVALID_REQUEST before v3) and nothing is
// deleted, as Kafka's ControllerApis.deleteTopics.
func init() { register(20, 1, 6, handleDeleteTopics) }

func handleDeleteTopics(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	if !s.cfg.DeleteTopicEnable {
		return respond(deletionDisabled(req, resp))
	}
	names, ids, refused := deleteTopicsTargets(req)
	resp.Topics = append(resp.Topics, refused...)
	names, ids, denied := s.authorizeDeleteTopics(r, names, ids)
	resp.Topics = append(resp.Topics, denied...)
	// DeleteTopics' controller mutation quota is strict from v5.
	quota := s.mutationQuotaFor(r, 5)
	names, ids, throttled := s.deleteTopicsQuota(quota, names, ids)
	resp.Topics = append(resp.Topics, throttled...)
	timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(s.ctx, timeout)
	results := s.ctrl.DeleteTopics(ctx, names, ids)
	cancel()
	if err := s.reconcile(s.meta.Image()); err != nil {
		s.log.Error("apply metadata", "err", err)
	}
	for _, res := range results {
		st := kmsg.NewDeleteTopicsResponseTopic()
		if res.Name != "" {
			name := res.Name
			st.Topic = &name
		}
		st.TopicID = res.ID
		if res.Err != nil {
			st.ErrorCode = errCode(res.Err)
			msg := res.Err.Error()
			st.ErrorMessage = &msg
		} else {
			s.log.Info("deleted topic", "topic", res.Name)
		}
		resp.Topics = append(resp.Topics, st)
	}
	resp.ThrottleMillis = max(resp.ThrottleMillis, quota.finish())
	return respond(resp)
}

// deleteTopicsQuota counts each existing topic's partitions against the
// controller mutation quota, as Kafka's ReplicationControlManager.deleteTopic
// does, and answers THROTTLING_QUOTA_EXCEEDED for those it refuses. A
// topic that does not exist mutates nothing; the controller answers it.
func (s *Server) deleteTopicsQuota(quota *mutationQuota, names []string, ids [][16]byte) ([]string, [][16]byte, []kmsg.DeleteTopicsResponseTopic) {
	img := s.meta.Image()
	var throttled []kmsg.DeleteTopicsResponseTopic
	refuse := func(name *string, id [16]byte) {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = name, id
		st.ErrorCode = kerr.ThrottlingQuotaExceeded.Code
		msg := throttlingQuotaExceeded
		st.ErrorMessage = &msg
		throttled = append(throttled, st)
	}
	keptNames := names[:0:0]
	for _, n := range names {
		if t, ok := img.Topic(n); ok && !quota.allow(len(t.Partitions)) {
			refuse(&n, t.ID)
			continue
		}
		keptNames = append(keptNames, n)
	}
	keptIDs := ids[:0:0]
	for _, id := range ids {
		if t, ok := img.TopicByID(id); ok && !quota.allow(len(t.Partitions)) {
			name := t.Name
			refuse(&name, id)
			continue
		}
		keptIDs = append(keptIDs, id)
	}
	return keptNames, keptIDs, throttled
}

// deletionDisabled answers every topic of the request with Kafka's error
// for delete.topic.enable=false.
func deletionDisabled(req *kmsg.DeleteTopicsRequest, resp *kmsg.DeleteTopicsResponse) *kmsg.DeleteTopicsResponse {
	code := kerr.TopicDeletionDisabled.Code
	if req.Version < 3 {
		code = kerr.InvalidRequest.Code
	}
	add := func(name *string, id [16]byte) {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID, st.ErrorCode = name, id, code
		resp.Topics = append(resp.Topics, st)
	}
	if req.Version < 6 {
		for _, n := range req.TopicNames {
			add(&n, [16]byte{})
		}
		return resp
	}
	for _, t := range req.Topics {
		add(t.Topic, t.TopicID)
	}
	return resp
}

// deleteTopicsTargets sorts out what a DeleteTopics names, as Kafka's
// ControllerApis.deleteTopics does: a topic named twice (by name or by
// id), one named by both name and id, and one named by neither are each
// answered INVALID_REQUEST once and not deleted.
func deleteTopicsTargets(req *kmsg.DeleteTopicsRequest) (names []string, ids [][16]byte, refused []kmsg.DeleteTopicsResponseTopic) {
	refuse := func(name *string, id [16]byte, msg string) {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = name, id
		st.ErrorCode = kerr.InvalidRequest.Code
		st.ErrorMessage = &msg
		refused = append(refused, st)
	}
	nameCount := make(map[string]int)
	idCount := make(map[[16]byte]int)
	var nameOrder []string
	var idOrder [][16]byte
	addName := func(n string) {
		if nameCount[n] == 0 {
			nameOrder = append(nameOrder, n)
		}
		nameCount[n]++
	}
	if req.Version < 6 {
		for _, n := range req.TopicNames {
			addName(n)
		}
	}
	for _, t := range req.Topics {
		switch {
		case t.Topic == nil && t.TopicID == [16]byte{}:
			refuse(nil, t.TopicID, "Neither topic name nor id were specified.")
		case t.Topic == nil:
			if idCount[t.TopicID] == 0 {
				idOrder = append(idOrder, t.TopicID)
			}
			idCount[t.TopicID]++
		case t.TopicID != [16]byte{}:
			refuse(t.Topic, t.TopicID, "You may not specify both topic name and topic id.")
		default:
			addName(*t.Topic)
		}
	}
	for _, n := range nameOrder {
		if nameCount[n] > 1 {
			refuse(&n, [16]byte{}, "Duplicate topic name.")
			continue
		}
		names = append(names, n)
	}
	for _, id := range idOrder {
		if idCount[id] > 1 {
			refuse(nil, id, "Duplicate topic id.")
			continue
		}
		ids = append(ids, id)
	}
	return names, ids, refused
}

// authorizeDeleteTopics is ControllerApis.deleteTopics' check: DELETE on
// the cluster allows every topic; otherwise a topic needs DELETE, and one
// the principal may not even DESCRIBE is refused whether or not it exists
// (and, asked for by id, without its name). It returns the names and ids
// left to delete and the answers of the refused ones.
func (s *Server) authorizeDeleteTopics(r *request, names []string, ids [][16]byte) ([]string, [][16]byte, []kmsg.DeleteTopicsResponseTopic) {
	ac := s.auth(r)
	if !ac.enabled() || ac.cluster(authz.OpDelete) {
		return names, ids, nil
	}
	var out []kmsg.DeleteTopicsResponseTopic
	deny := func(name *string, id [16]byte) {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID, st.ErrorCode = name, id, kerr.TopicAuthorizationFailed.Code
		msg := kerr.TopicAuthorizationFailed.Description
		st.ErrorMessage = &msg
		out = append(out, st)
	}
	img := s.meta.Image()
	var keptNames []string
	for _, n := range names {
		_, exists := img.Topic(n)
		if !ac.topic(authz.OpDescribe, n) || exists && !ac.topic(authz.OpDelete, n) {
			deny(&n, [16]byte{})
			continue
		}
		keptNames = append(keptNames, n)
	}
	var keptIDs [][16]byte
	for _, id := range ids {
		t, ok := img.TopicByID(id)
		if ok && !ac.topic(authz.OpDelete, t.Name) {
			var name *string
			if ac.topic(authz.OpDescribe, t.Name) {
				name = &t.Name
			}
			deny(name, id)
			continue
		}
		keptIDs = append(keptIDs, id)
	}
	return keptNames, keptIDs, out
}
