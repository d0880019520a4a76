package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/raftmeta"
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
// id from v10 on; an unknown id answers UNKNOWN_TOPIC_ID.
func init() { register(3, 0, 13, handleMetadata) }

const authorizedOpsNotRequested = -2147483648

func handleMetadata(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	allTopics := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	autoCreate := s.cfg.AutoCreateTopicsEnable && (req.Version < 4 || req.AllowAutoTopicCreation)

	img := s.meta.Image()
	if !allTopics && autoCreate {
		var missing []string
		for _, t := range req.Topics {
			if t.Topic == nil {
				continue
			}
			if _, ok := img.Topic(*t.Topic); !ok && raftmeta.ValidateTopicName(*t.Topic) == nil {
				missing = append(missing, *t.Topic)
			}
		}
		if len(missing) > 0 {
			img = s.autoCreateTopics(missing)
		}
	}

	resp.Brokers = s.metadataBrokers(img, r.conn.listener)
	resp.ClusterID = &img.ClusterID
	resp.ControllerID = s.controllerID(img)

	if allTopics {
		for _, name := range img.TopicNames() {
			t, _ := img.Topic(name)
			resp.Topics = append(resp.Topics, s.metadataTopic(img, t, req.IncludeTopicAuthorizedOperations))
		}
		if req.IncludeClusterAuthorizedOperations {
			resp.AuthorizedOperations = authorizedOpsNotRequested
		}
		return respond(resp)
	}
	for _, rt := range req.Topics {
		var t *raftmeta.TopicImage
		var ok bool
		if rt.Topic != nil {
			t, ok = img.Topic(*rt.Topic)
		} else {
			t, ok = img.TopicByID(rt.TopicID)
		}
		if ok {
			resp.Topics = append(resp.Topics, s.metadataTopic(img, t, req.IncludeTopicAuthorizedOperations))
			continue
		}
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = rt.Topic
		mt.TopicID = rt.TopicID
		mt.AuthorizedOperations = authorizedOpsNotRequested
		switch {
		case rt.Topic == nil:
			mt.ErrorCode = kerr.UnknownTopicID.Code
		case raftmeta.ValidateTopicName(*rt.Topic) != nil:
			mt.ErrorCode = kerr.InvalidTopicException.Code
		default:
			mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		}
		resp.Topics = append(resp.Topics, mt)
	}
	return respond(resp)
}

// autoCreateTopics creates topics with the broker defaults, as a Metadata
// request with auto-creation does, and returns the image that holds them.
func (s *Server) autoCreateTopics(names []string) *raftmeta.Image {
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	specs := make([]raftmeta.CreateTopic, len(names))
	for i, n := range names {
		specs[i] = raftmeta.CreateTopic{
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

func (s *Server) controllerID(img *raftmeta.Image) int32 {
	if id, ok := s.meta.LeaderID(); ok {
		return int32(id)
	}
	return -1
}

// metadataBrokers lists the live brokers with the address of the listener
// the client connected through, as Kafka does.
func (s *Server) metadataBrokers(img *raftmeta.Image, listener string) []kmsg.MetadataResponseBroker {
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

func (s *Server) metadataTopic(img *raftmeta.Image, t *raftmeta.TopicImage, withOps bool) kmsg.MetadataResponseTopic {
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
	return name == "__consumer_offsets" || name == "__transaction_state"
}
