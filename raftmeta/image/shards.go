package image

import "github.com/gregorbroker/gregor/internal/cowmap"

// idShard places topic ids, which are random already.
type idShard struct{}

func (idShard) ShardOf(id [16]byte) int { return int(id[15]^id[7]^id[0]) % cowmap.Shards }

// The image's topic maps (cowmap: a one-topic change copies
// O(topics/128), where a copy of every topic's entry cost each node three
// 10,000-entry map copies per CreateTopics, 9 ms at load 20:
// BenchmarkApplyCreateTopic).
type (
	topicsByName = cowmap.Map[string, *TopicImage, cowmap.Strings]
	topicsByID   = cowmap.Map[[16]byte, *TopicImage, idShard]
	namesByNorm  = cowmap.Map[string, string, cowmap.Strings]
)
