package broker

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/raftmeta/controller"
	"github.com/gregorbroker/gregor/raftmeta/image"
	"github.com/gregorbroker/gregor/security/authz"
)

// Metadata (key 3), versions 0-13.
//
// Old clients (sarama, kafka-go) still send v0 and v1, so every version
// kmsg knows is served. A null topic list (v1+) or an empty one at v0
// asks for every topic. Unknown topics are created when the request allows
// it (v4+, always before v4) and auto.create.topics.enable is on, with
// num.partitions and default.replication.factor; the creation commits
// before the answer, so the answer already carries the new topic's
// partitions. Kafka answers LEADER_NOT_AVAILABLE there and clients ask
// again; answering at once spares them the round (kafka-go's Writer would
// fail its first write), at the cost of one kafka-go peer test that expects
// Kafka's answer (docs/compatibility.md). Topics can be asked for by
// id from v12 on (v10 and v11 have the field, but Kafka refuses a non-zero
// id or a null name there with INVALID_REQUEST); an unknown id answers
// UNKNOWN_TOPIC_ID, and a request with ids is answered for its ids alone.
// A topic asked for twice is answered once.
func init() { register(3, 0, 13, handleMetadata) }

const authorizedOpsNotRequested = -2147483648

func handleMetadata(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	allTopics := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	autoCreate := s.cfg.AutoCreateTopicsEnable && (req.Version < 4 || req.AllowAutoTopicCreation)

	if !allTopics && req.Version < 12 {
		for _, t := range req.Topics {
			// KafkaApis.handleTopicMetadataRequest: topic ids (and so
			// null names) only from v12.
			if t.Topic == nil || t.TopicID != [16]byte{} {
				return respond(metadataErrorResponse(req, kerr.InvalidRequest))
			}
		}
	}
	ids, names := metadataTopicKeys(req)
	img := s.meta.Image()
	// KafkaApis: a topic the principal may not DESCRIBE is left out of an
	// all-topics answer and answered TOPIC_AUTHORIZATION_FAILED (without
	// its id) when named, whether or not it exists; a missing topic is
	// auto-created only with CREATE on the cluster or on the topic.
	ac := s.auth(r)
	denied := map[string]*kerr.Error{}
	for _, name := range names {
		if !ac.topic(authz.OpDescribe, name) {
			denied[name] = kerr.TopicAuthorizationFailed
		}
	}
	if len(names) > 0 && autoCreate {
		var missing []string
		for _, name := range names {
			if _, ok := img.Topic(name); !ok && denied[name] == nil && image.ValidateTopicName(name) == nil {
				// Kafka asks the cluster with logIfDenied=false: CREATE
				// on the topic may still allow it.
				if !ac.quiet().cluster(authz.OpCreate) && !ac.topic(authz.OpCreate, name) {
					denied[name] = kerr.TopicAuthorizationFailed
					continue
				}
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 {
			img = s.autoCreateTopics(missing)
		}
	}
	withOps := req.Version >= 8 && req.IncludeTopicAuthorizedOperations
	topicOps := func(mt *kmsg.MetadataResponseTopic) {
		if withOps && mt.Topic != nil {
			mt.AuthorizedOperations = ac.operations(authz.ResourceTopic, *mt.Topic, authz.TopicOperations)
		}
	}

	resp.Brokers = s.metadataBrokers(img, r.conn.listener)
	resp.ClusterID = &img.ClusterID
	resp.ControllerID = s.controllerID(img)
	if req.Version >= 8 && req.Version <= 10 && req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = 0
		if ac.cluster(authz.OpDescribe) {
			resp.AuthorizedOperations = ac.operations(authz.ResourceCluster, authz.ClusterName, authz.ClusterOperations)
		}
	}

	if allTopics {
		for _, name := range img.TopicNames() {
			// A filter, not a topic the client named: Kafka's
			// logIfDenied=false.
			if !ac.quiet().topic(authz.OpDescribe, name) {
				continue
			}
			t, _ := img.Topic(name)
			mt := s.metadataTopic(img, t, req.IncludeTopicAuthorizedOperations)
			topicOps(&mt)
			resp.Topics = append(resp.Topics, mt)
		}
		return respond(resp)
	}
	for _, id := range ids {
		if t, ok := img.TopicByID(id); ok {
			if !ac.topic(authz.OpDescribe, t.Name) {
				// Topic ids are not secret: Kafka answers the id.
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID = id
				mt.AuthorizedOperations = authorizedOpsNotRequested
				mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			mt := s.metadataTopic(img, t, req.IncludeTopicAuthorizedOperations)
			topicOps(&mt)
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		mt := kmsg.NewMetadataResponseTopic()
		mt.TopicID = id
		mt.AuthorizedOperations = authorizedOpsNotRequested
		mt.ErrorCode = kerr.UnknownTopicID.Code
		resp.Topics = append(resp.Topics, mt)
	}
	for _, name := range names {
		if ke := denied[name]; ke != nil {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic = &name
			mt.AuthorizedOperations = authorizedOpsNotRequested
			mt.ErrorCode = ke.Code
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		if t, ok := img.Topic(name); ok {
			mt := s.metadataTopic(img, t, req.IncludeTopicAuthorizedOperations)
			topicOps(&mt)
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = &name
		mt.AuthorizedOperations = authorizedOpsNotRequested
		mt.IsInternal = isInternalTopic(name)
		mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		if image.ValidateTopicName(name) != nil {
			mt.ErrorCode = kerr.InvalidTopicException.Code
		}
		topicOps(&mt)
		resp.Topics = append(resp.Topics, mt)
	}
	return respond(resp)
}

// metadataTopicKeys is what a request for named topics asks for, each
// once (Kafka keeps them in sets): the non-zero topic ids (v10+) if there
// are any, as Kafka then ignores the names; otherwise the names.
func metadataTopicKeys(req *kmsg.MetadataRequest) (ids [][16]byte, names []string) {
	seenID := make(map[[16]byte]bool)
	seenName := make(map[string]bool)
	for _, t := range req.Topics {
		if req.Version >= 10 && t.TopicID != [16]byte{} && !seenID[t.TopicID] {
			seenID[t.TopicID] = true
			ids = append(ids, t.TopicID)
		}
		if t.Topic != nil && !seenName[*t.Topic] {
			seenName[*t.Topic] = true
			names = append(names, *t.Topic)
		}
	}
	if len(ids) > 0 {
		return ids, nil
	}
	if slices.ContainsFunc(req.Topics, func(t kmsg.MetadataRequestTopic) bool { return t.Topic == nil }) {
		// Neither a name nor an id: answered as an unknown id (Kafka
		// fails on the null name).
		ids = append(ids, [16]byte{})
	}
	return ids, names
}

// metadataErrorResponse is MetadataRequest.getErrorResponse: each asked
// topic with the error, nothing else.
func metadataErrorResponse(req *kmsg.MetadataRequest, ke *kerr.Error) *kmsg.MetadataResponse {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	for _, t := range req.Topics {
		mt := kmsg.NewMetadataResponseTopic()
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		mt.Topic, mt.TopicID, mt.ErrorCode = &name, t.TopicID, ke.Code
		mt.AuthorizedOperations = authorizedOpsNotRequested
		resp.Topics = append(resp.Topics, mt)
	}
	return resp
}

// autoCreateTopics creates topics with the broker defaults, as a Metadata
// request with auto-creation does, and returns the image that holds them.
func (s *Server) autoCreateTopics(names []string) *image.Image {
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	specs := make([]controller.CreateTopic, len(names))
	for i, n := range names {
		specs[i] = controller.CreateTopic{
			Name:              n,
			NumPartitions:     s.cfg.NumPartitions,
			ReplicationFactor: s.cfg.DefaultReplicationFactor,
		}
	}
	for _, res := range s.ctrl.CreateTopics(ctx, specs, false) {
		if res.Err != nil && errCode(res.Err) != kerr.TopicAlreadyExists.Code {
			s.log.Warn("auto-create topic", "topic", res.Name, "err", res.Err)
		} else if res.Err == nil {
			s.log.Info("auto-created topic", "topic", res.Name, "partitions", res.NumPartitions)
		}
	}
	img := s.meta.Image()
	if err := s.reconcile(img); err != nil {
		s.log.Error("apply metadata", "err", err)
	}
	return img
}

func (s *Server) controllerID(img *image.Image) int32 {
	if id, ok := s.meta.LeaderID(); ok {
		return int32(id)
	}
	return -1
}

// metadataBrokers lists the live brokers with the address of the listener
// the client connected through, as Kafka does.
func (s *Server) metadataBrokers(img *image.Image, listener string) []kmsg.MetadataResponseBroker {
	var out []kmsg.MetadataResponseBroker
	for _, b := range img.Brokers() {
		if b.Fenced {
			continue
		}
		l, ok := b.Listener(listener)
		if !ok {
			continue
		}
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID = b.ID
		mb.Host = l.Host
		mb.Port = l.Port
		mb.Rack = b.Rack
		out = append(out, mb)
	}
	return out
}

func (s *Server) metadataTopic(img *image.Image, t *image.TopicImage, withOps bool) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = t.ID
	mt.IsInternal = isInternalTopic(t.Name)
	mt.AuthorizedOperations = authorizedOpsNotRequested
	for i, pi := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = int32(i)
		mp.Leader = pi.Leader
		mp.LeaderEpoch = pi.LeaderEpoch
		mp.Replicas = pi.Replicas
		mp.ISR = pi.ISR
		mp.OfflineReplicas = []int32{}
		if pi.Leader < 0 {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

func isInternalTopic(name string) bool {
	return name == "__consumer_offsets" || name == "__transaction_state" || name == "__share_group_state"
}
