package broker

import (
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/config"
)

// DescribeConfigs (key 32), versions 1-4 (Kafka 4's range).
//
// Topic resources list every topic config with its value and source: a
// topic override (DYNAMIC_TOPIC_CONFIG), the broker property that supplies
// its default (STATIC_BROKER_CONFIG), or Kafka's default (DEFAULT_CONFIG),
// with synonyms when asked (v1+) and documentation (v3+). Broker resources
// list this broker's configs; another broker's id answers INVALID_REQUEST,
// since a node knows only its own static file (clients send a broker's
// DescribeConfigs to that broker). Broker loggers (8) answer
// INVALID_REQUEST.
func init() { register(32, 1, 4, handleDescribeConfigs) }

const (
	resourceTopic  = 2
	resourceBroker = 4
)

func handleDescribeConfigs(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	img := s.meta.Image()
	for _, rr := range req.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType = rr.ResourceType
		sr.ResourceName = rr.ResourceName
		var entries []config.Entry
		switch rr.ResourceType {
		case resourceTopic:
			t, ok := img.Topic(rr.ResourceName)
			if !ok {
				sr.ErrorCode = kerr.UnknownTopicOrPartition.Code
				break
			}
			entries = s.cfg.DescribeTopic(t.Configs)
		case resourceBroker:
			id, err := strconv.ParseInt(rr.ResourceName, 10, 32)
			switch {
			case rr.ResourceName == "":
				entries = s.cfg.DescribeBroker()
			case err != nil:
				sr.ErrorCode = kerr.InvalidRequest.Code
			case int32(id) != s.cfg.NodeID:
				sr.ErrorCode = kerr.InvalidRequest.Code
				msg := "broker " + rr.ResourceName + " is not this broker"
				sr.ErrorMessage = &msg
			default:
				entries = s.cfg.DescribeBroker()
			}
		default:
			sr.ErrorCode = kerr.InvalidRequest.Code
			msg := "unsupported resource type"
			sr.ErrorMessage = &msg
		}
		for _, e := range entries {
			if rr.ConfigNames != nil && !slices.Contains(rr.ConfigNames, e.Name) {
				continue
			}
			sr.Configs = append(sr.Configs, describeEntry(e, req))
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return respond(resp)
}

func describeEntry(e config.Entry, req *kmsg.DescribeConfigsRequest) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name = e.Name
	if !e.IsNull && !e.Sensitive {
		v := e.Value
		c.Value = &v
	}
	c.ReadOnly = e.ReadOnly
	c.Source = kmsg.ConfigSource(e.Source)
	c.IsDefault = e.Source == int8(kmsg.ConfigSourceDefaultConfig)
	c.IsSensitive = e.Sensitive
	c.ConfigType = kmsg.ConfigType(e.Type)
	if req.IncludeDocumentation {
		doc := e.Doc
		c.Documentation = &doc
	}
	if req.IncludeSynonyms {
		for _, syn := range e.Synonyms {
			cs := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			cs.Name = syn.Name
			v := syn.Value
			cs.Value = &v
			cs.Source = kmsg.ConfigSource(syn.Source)
			c.ConfigSynonyms = append(c.ConfigSynonyms, cs)
		}
	}
	return c
}
