package broker

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/raftmeta/controller"
	"github.com/gregorbroker/gregor/security/authz"
)

// CreateTopics (key 19), versions 2-7 (Kafka 4's range).
//
// Topic configs are checked here against Kafka's topic config table
// (INVALID_CONFIG); names, partition counts, replication factors and
// replica assignments by the controller, which commits the topic to the
// metadata log before this answers (the partitions' logs are created
// afterwards, by the metadata watcher). -1 partitions or replication factor
// take num.partitions and default.replication.factor. A topic named twice
// in one request answers INVALID_REQUEST for each. v5+ answers with the
// topic's resolved configs, v7+ with its id.
func init() { register(19, 2, 7, handleCreateTopics) }

// createSlot is one requested topic's answer, and where its spec is.
type createSlot struct {
	resp  kmsg.CreateTopicsResponseTopic
	index int // into specs; -1 when already answered, -2 when not answered on its own
}

func handleCreateTopics(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)

	seen := make(map[string]int)
	for _, t := range req.Topics {
		seen[t.Topic]++
	}
	slots := make([]createSlot, len(req.Topics))
	var specs []controller.CreateTopic
	ac := s.auth(r)
	createAll := ac.cluster(authz.OpCreate)
	// CreateTopics' controller mutation quota is strict from v6.
	quota := s.mutationQuotaFor(r, 6)
	img := s.meta.Image()
	for i := range req.Topics {
		t := &req.Topics[i]
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = t.Topic
		st.NumPartitions, st.ReplicationFactor = -1, -1
		slots[i] = createSlot{resp: st, index: -1}
		if seen[t.Topic] > 1 {
			// Answered once, as ControllerApis.createTopics does.
			seen[t.Topic] = -1
			setCreateErr(&slots[i].resp, kerr.InvalidRequest, "Duplicate topic name.")
			continue
		}
		if seen[t.Topic] < 0 {
			slots[i].index = -2 // a later copy of a duplicate: no answer of its own
			continue
		}
		// ControllerApis.createTopics: CREATE on the cluster or the topic.
		if !createAll && !ac.topic(authz.OpCreate, t.Topic) {
			setCreateErr(&slots[i].resp, kerr.TopicAuthorizationFailed, "Authorization failed.")
			continue
		}
		spec, ok := s.createTopicSpec(req, t, &slots[i].resp)
		if !ok {
			continue
		}
		// The new partitions count against the quota; a topic that
		// exists mutates nothing (the controller answers it
		// TOPIC_ALREADY_EXISTS).
		if _, exists := img.Topic(t.Topic); !exists && !quota.allow(newTopicPartitions(spec)) {
			setCreateErr(&slots[i].resp, kerr.ThrottlingQuotaExceeded, throttlingQuotaExceeded)
			continue
		}
		slots[i].index = len(specs)
		specs = append(specs, spec)
	}
	if len(specs) > 0 {
		s.createTopics(req, specs, slots)
	}
	for _, sl := range slots {
		if sl.index == -2 {
			continue
		}
		if sl.resp.ErrorCode == 0 && !ac.topic(authz.OpDescribeConfigs, sl.resp.Topic) {
			// The created topic's configs are shown only to whom may
			// describe them.
			sl.resp.ConfigErrorCode, sl.resp.Configs = kerr.TopicAuthorizationFailed.Code, nil
		}
		resp.Topics = append(resp.Topics, sl.resp)
	}
	resp.ThrottleMillis = max(resp.ThrottleMillis, quota.finish())
	return respond(resp)
}

// newTopicPartitions is how many partitions a topic's creation makes.
func newTopicPartitions(spec controller.CreateTopic) int {
	if spec.Assignments != nil {
		return len(spec.Assignments)
	}
	return int(spec.NumPartitions)
}

// createTopicSpec checks one requested topic and makes its spec for the
// controller, with the broker's defaults for what it leaves at -1; a
// topic that fails a check gets its error in st and no spec.
func (s *Server) createTopicSpec(req *kmsg.CreateTopicsRequest, t *kmsg.CreateTopicsRequestTopic, st *kmsg.CreateTopicsResponseTopic) (controller.CreateTopic, bool) {
	if req.TimeoutMillis < 0 {
		// The controller's deadline is already past.
		setCreateErr(st, kerr.RequestTimedOut, "the request's timeout is negative")
		return controller.CreateTopic{}, false
	}
	configs := make(map[string]string, len(t.Configs))
	for _, c := range t.Configs {
		if c.Value == nil {
			setCreateErr(st, kerr.InvalidConfig, "null value for config "+c.Name)
			return controller.CreateTopic{}, false
		}
		configs[c.Name] = *c.Value
	}
	if err := config.ValidateTopicConfigs(configs); err != nil {
		setCreateErr(st, kerr.InvalidConfig, err.Error())
		return controller.CreateTopic{}, false
	}
	spec := controller.CreateTopic{
		Name:              t.Topic,
		NumPartitions:     t.NumPartitions,
		ReplicationFactor: t.ReplicationFactor,
		Configs:           configs,
	}
	if len(t.ReplicaAssignment) > 0 {
		if t.NumPartitions != -1 || t.ReplicationFactor != -1 {
			setCreateErr(st, kerr.InvalidRequest, "both replica assignment and partitions or replication factor given")
			return controller.CreateTopic{}, false
		}
		spec.Assignments = make(map[int32][]int32, len(t.ReplicaAssignment))
		for _, a := range t.ReplicaAssignment {
			spec.Assignments[a.Partition] = a.Replicas
		}
		// The controller takes partitions and replication factor from
		// the assignment; both stay -1, as Kafka requires.
	}
	if spec.NumPartitions == -1 && spec.Assignments == nil {
		spec.NumPartitions = s.cfg.NumPartitions
	}
	if spec.ReplicationFactor == -1 && spec.Assignments == nil {
		spec.ReplicationFactor = s.cfg.DefaultReplicationFactor
	}
	return spec, true
}

// createTopics has the controller create (or, for validateOnly, check)
// specs, applies the new metadata here, and answers the slots that hold
// them.
func (s *Server) createTopics(req *kmsg.CreateTopicsRequest, specs []controller.CreateTopic, slots []createSlot) {
	timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(s.ctx, timeout)
	results := s.ctrl.CreateTopics(ctx, specs, req.ValidateOnly)
	cancel()
	// The answer goes out once the topics are committed; their logs are
	// made by the metadata watcher (watchMetadata), as a Kafka broker
	// makes them when it replays the records, off the client's path. A
	// produce that comes before them answers NOT_LEADER_OR_FOLLOWER,
	// which clients retry, as they do against Kafka.
	for i := range slots {
		if slots[i].index < 0 {
			continue
		}
		s.answerCreated(&slots[i].resp, results[slots[i].index], specs[slots[i].index].Configs, req.ValidateOnly)
	}
}

// answerCreated fills in the answer st of a topic the controller created
// (or checked, for validateOnly) as res says: its id, counts and resolved
// configs, or its error.
func (s *Server) answerCreated(st *kmsg.CreateTopicsResponseTopic, res controller.CreateTopicResult, configs map[string]string, validateOnly bool) {
	if res.Err != nil {
		setCreateErr(st, errKerr(res.Err), res.Err.Error())
		return
	}
	st.TopicID = res.ID
	st.NumPartitions = res.NumPartitions
	st.ReplicationFactor = res.ReplicationFactor
	if !validateOnly {
		s.failUncreatedPartitions(st)
	}
	if len(configs) == 0 {
		st.Configs = s.defaultTopicConfigs()
	} else {
		st.Configs = describeCreated(s.cfg.DescribeTopic(configs))
	}
	if !validateOnly {
		s.log.Info("created topic", "topic", st.Topic, "partitions", st.NumPartitions, "replication_factor", st.ReplicationFactor)
		s.warnUnsupportedTopicConfigs(st.Topic, configs)
		if strings.ContainsAny(st.Topic, "._") {
			s.log.Warn("topic names with a period or an underscore can collide in metric names; use one or the other, not both", "topic", st.Topic)
		}
	}
}

// describeCreated is a created topic's configs as CreateTopics v5+
// answers them.
func describeCreated(entries []config.Entry) []kmsg.CreateTopicsResponseTopicConfig {
	out := make([]kmsg.CreateTopicsResponseTopicConfig, 0, len(entries))
	for _, e := range entries {
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		c.Name = e.Name
		if !e.IsNull {
			v := e.Value
			c.Value = &v
		}
		c.ReadOnly, c.Source, c.IsSensitive = e.ReadOnly, e.Source, e.Sensitive
		out = append(out, c)
	}
	return out
}

// defaultTopicConfigs is the configs of a topic created without
// overrides, made once: they depend only on the broker's static configs,
// and resolving them (40 configs, their synonyms, a sort) took 65-200 µs
// of each CreateTopics' answer. Answers share the slice, which nothing
// writes once made.
func (s *Server) defaultTopicConfigs() []kmsg.CreateTopicsResponseTopicConfig {
	s.createdConfigsOnce.Do(func() {
		s.createdConfigs = describeCreated(s.cfg.DescribeTopic(nil))
	})
	return s.createdConfigs
}

// failUncreatedPartitions answers KAFKA_STORAGE_ERROR for a topic the
// controller created but some of whose partitions this node could not
// create a log for (out of file descriptors or space), when the metadata
// watcher has already tried by the time of the answer: the topic exists,
// and the broker keeps trying to create those logs (metadata_sync.go),
// but until they exist the partitions cannot serve. The answer does not
// wait for the watcher (Kafka's does not either); a partition whose log
// is not made answers KAFKA_STORAGE_ERROR to produce and fetch and is
// reported offline by Metadata, on this broker as on any other.
func (s *Server) failUncreatedPartitions(st *kmsg.CreateTopicsResponseTopic) {
	tp := s.parts.topic(st.Topic)
	if tp == nil || tp.id != st.TopicID || len(tp.failed) == 0 {
		return
	}
	var first error
	var lowest int32 = -1
	for p, err := range tp.failed {
		if lowest < 0 || p < lowest {
			lowest, first = p, err
		}
	}
	setCreateErr(st, kerr.KafkaStorageError, fmt.Sprintf(
		"topic created, but broker %d could not create the logs of %d of its partitions (retrying in the background): %v",
		s.cfg.NodeID, len(tp.failed), first))
}

func setCreateErr(st *kmsg.CreateTopicsResponseTopic, ke *kerr.Error, msg string) {
	st.ErrorCode = ke.Code
	st.ErrorMessage = &msg
}

// errKerr is the Kafka error err carries, or UNKNOWN_SERVER_ERROR.
func errKerr(err error) *kerr.Error {
	if ke := kerr.ErrorForCode(errCode(err)); ke != nil {
		if k, ok := ke.(*kerr.Error); ok {
			return k
		}
	}
	return kerr.UnknownServerError
}
