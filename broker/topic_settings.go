package broker

import (
	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/protocol"
)

// warnUnsupportedTopicConfigs logs one warning for each config just set on
// a topic that has no effect in Gregor (config.UnsupportedTopicConfigs and
// docs/configuration.md), so that a setting accepted for Kafka's tools is
// never silently ignored.
func (s *Server) warnUnsupportedTopicConfigs(topic string, set map[string]string) {
	for _, u := range config.UnsupportedTopicConfigs(set) {
		s.log.Warn("topic config not supported, it has no effect",
			"topic", topic, "name", u.Name, "value", u.Value, "why", u.Why)
	}
}

// compressionLevel is the topic's level for the codec the broker
// compresses with (compression.gzip.level, .lz4.level, .zstd.level).
func compressionLevel(cfg *config.Topic, c protocol.Codec) int {
	switch c {
	case protocol.CodecGzip:
		return int(cfg.CompressionGzipLevel)
	case protocol.CodecLZ4:
		return int(cfg.CompressionLz4Level)
	case protocol.CodecZstd:
		return int(cfg.CompressionZstdLevel)
	}
	return protocol.DefaultLevel(c)
}
