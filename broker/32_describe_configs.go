package broker

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/raftmeta/image"
	"github.com/gregorbroker/gregor/security/authz"
)

// DescribeConfigs (key 32), versions 1-4 (Kafka 4's range).
//
// Topic resources list every topic config with its value and source: a
// topic override (DYNAMIC_TOPIC_CONFIG), the broker property that supplies
// its default (STATIC_BROKER_CONFIG), or Kafka's default (DEFAULT_CONFIG),
// with synonyms when asked (v1+) and documentation (v3+). Broker resources
// list this broker's configs, dynamic ones first (DYNAMIC_BROKER_CONFIG,
// DYNAMIC_DEFAULT_BROKER_CONFIG); the empty name asks for the cluster-wide
// dynamic defaults, only those set; another broker's id answers
// INVALID_REQUEST, since a node knows only its own static file (clients
// send a broker's DescribeConfigs to that broker). Client metrics
// subscriptions: none exist, so each named one has no configs. Broker
// loggers and groups answer INVALID_REQUEST (not served). The checks are
// Kafka's ConfigHelper.handleDescribeConfigsRequest and describeConfigs:
// a resource type Kafka does not know fails the whole request.
func init() { register(32, 1, 4, handleDescribeConfigs) }

const (
	resourceTopic  = 2
	resourceBroker = 4
)

func handleDescribeConfigs(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		switch rr.ResourceType {
		case resourceTopic, resourceBroker, resourceBrokerLogger, resourceClientMetrics, resourceGroup:
			continue
		}
		// Kafka throws while sorting the resources by authorization:
		// every resource answers the error.
		for _, rr := range req.Resources {
			sr := kmsg.NewDescribeConfigsResponseResource()
			sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
			sr.ErrorCode = kerr.InvalidRequest.Code
			msg := kerr.InvalidRequest.Description
			sr.ErrorMessage = &msg
			resp.Resources = append(resp.Resources, sr)
		}
		return respond(resp)
	}
	img := s.meta.Image()
	ac := s.auth(r)
	for _, rr := range req.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType = rr.ResourceType
		sr.ResourceName = rr.ResourceName
		if ke := ac.configsDenied(rr.ResourceType, rr.ResourceName, authz.OpDescribeConfigs); ke != nil {
			msg := ke.Description
			sr.ErrorCode, sr.ErrorMessage = ke.Code, &msg
			resp.Resources = append(resp.Resources, sr)
			continue
		}
		entries, err := s.describeResource(img, rr.ResourceType, rr.ResourceName)
		if err != nil {
			setAlterErr(&sr.ErrorCode, &sr.ErrorMessage, err)
		}
		for _, e := range entries {
			if len(rr.ConfigNames) > 0 && !slices.Contains(rr.ConfigNames, e.Name) {
				continue
			}
			sr.Configs = append(sr.Configs, describeEntry(e, req))
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return respond(resp)
}

// describeResource is the configs of one resource, or Kafka's error for
// it (ConfigHelper.describeConfigs).
func (s *Server) describeResource(img *image.Image, rtype kmsg.ConfigResourceType, name string) ([]config.Entry, error) {
	switch rtype {
	case resourceTopic:
		if err := image.ValidateTopicName(name); err != nil {
			return nil, kerrMsg(kerr.InvalidTopicException, err.Error())
		}
		t, ok := img.Topic(name)
		if !ok {
			return nil, kerr.UnknownTopicOrPartition
		}
		return s.cfg.DescribeTopicDynamic(t.Configs, s.dynamicConfigs(img)), nil
	case resourceBroker:
		if name == "" {
			return config.DescribeClusterDefaults(img.BrokerConfigs("")), nil
		}
		id, err := strconv.ParseInt(name, 10, 32)
		if err != nil {
			return nil, kerrMsg(kerr.InvalidRequest, "Broker id must be an integer, but it is: "+name)
		}
		if int32(id) != s.cfg.NodeID {
			return nil, kerrMsg(kerr.InvalidRequest, fmt.Sprintf("Unexpected broker id, expected %d or empty string, but received %s", s.cfg.NodeID, name))
		}
		return s.cfg.DescribeBrokerDynamic(s.dynamicConfigs(img)), nil
	case resourceBrokerLogger:
		if name == "" {
			return nil, kerrMsg(kerr.InvalidRequest, "Broker id must not be empty")
		}
		return nil, kerrMsg(kerr.InvalidRequest, "broker loggers are not supported")
	case resourceClientMetrics:
		if name == "" {
			return nil, kerrMsg(kerr.InvalidRequest, "Client metrics subscription name must not be empty")
		}
		return nil, nil
	default: // resourceGroup
		if name == "" {
			return nil, kerrMsg(kerr.InvalidRequest, "Group name must not be empty")
		}
		return s.describeGroupConfigs(img, name), nil
	}
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
