package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/raftmeta/controller"
	"github.com/gregorbroker/gregor/security/authz"
)

// CreatePartitions (key 37), versions 0-3.
//
// Grows a topic to Count partitions (INVALID_PARTITIONS when Count is not
// larger than today's), with replicas placed by the controller or given in
// Assignment. A topic named twice is answered once, INVALID_REQUEST, and
// not grown (ControllerApis.createPartitions). A negative timeout answers
// REQUEST_TIMED_OUT for every topic and grows nothing; 0 waits up to 30s
// (Kafka's controller would time it out too, but clients that mean "do not
// wait" send it).
func init() { register(37, 0, 3, handleCreatePartitions) }

func handleCreatePartitions(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	if req.TimeoutMillis < 0 {
		// A deadline already past: Kafka's controller times the request
		// out before it runs (CreatePartitionsRequest.getErrorResponse).
		for _, t := range req.Topics {
			st := kmsg.NewCreatePartitionsResponseTopic()
			st.Topic, st.ErrorCode = t.Topic, kerr.RequestTimedOut.Code
			resp.Topics = append(resp.Topics, st)
		}
		return respond(resp)
	}
	seen := make(map[string]int)
	for _, t := range req.Topics {
		seen[t.Topic]++
	}
	var specs []controller.CreatePartitions
	// idxDenied marks a topic the principal may not ALTER
	// (ControllerApis.createPartitions answers it without a message).
	const idxDenied = -2
	ac := s.auth(r)
	// CreatePartitions' controller mutation quota is strict from v3.
	quota := s.mutationQuotaFor(r, 3)
	img := s.meta.Image()
	// idxThrottled marks a topic the quota refused.
	const idxThrottled = -3
	idx := make([]int, len(req.Topics))
	for i, t := range req.Topics {
		idx[i] = -1
		if seen[t.Topic] > 1 {
			continue
		}
		if !ac.topic(authz.OpAlter, t.Topic) {
			idx[i] = idxDenied
			continue
		}
		// The added partitions count against the quota; a topic that
		// does not exist or would not grow mutates nothing (the
		// controller answers it).
		if ti, ok := img.Topic(t.Topic); ok && !quota.allow(int(t.Count)-len(ti.Partitions)) {
			idx[i] = idxThrottled
			continue
		}
		spec := controller.CreatePartitions{Topic: t.Topic, Count: t.Count}
		for _, a := range t.Assignment {
			spec.Assignments = append(spec.Assignments, a.Replicas)
		}
		idx[i] = len(specs)
		specs = append(specs, spec)
	}
	timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(s.ctx, timeout)
	results := s.ctrl.CreatePartitions(ctx, specs, req.ValidateOnly)
	cancel()
	// As CreateTopics: answered once committed, the new partitions' logs
	// made by the metadata watcher.
	answered := make(map[string]bool)
	for i, t := range req.Topics {
		if answered[t.Topic] {
			continue
		}
		answered[t.Topic] = true
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = t.Topic
		var err error
		if idx[i] == idxDenied {
			st.ErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, st)
			continue
		}
		switch {
		case idx[i] == idxThrottled:
			err = kerrMsg(kerr.ThrottlingQuotaExceeded, throttlingQuotaExceeded)
		case idx[i] < 0:
			err = kerrMsg(kerr.InvalidRequest, "Duplicate topic name.")
		default:
			err = results[idx[i]].Err
		}
		if err != nil {
			st.ErrorCode = errCode(err)
			msg := err.Error()
			st.ErrorMessage = &msg
		}
		resp.Topics = append(resp.Topics, st)
	}
	resp.ThrottleMillis = max(resp.ThrottleMillis, quota.finish())
	return respond(resp)
}
