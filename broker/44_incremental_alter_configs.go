package broker

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/config"
)

// IncrementalAlterConfigs (key 44), versions 0-1.
//
// Topic configs change by operation: SET (0), DELETE (1, back to the
// broker default), APPEND (2) and SUBTRACT (3), the last two for list
// configs only (cleanup.policy), as Kafka. The resulting set is validated
// whole against Kafka's topic config rules (INVALID_CONFIG), then committed
// to the metadata log before the answer. Broker resources answer
// INVALID_REQUEST: Gregor has no dynamic broker configs yet, and accepting
// a change it would not apply is worse than refusing it.
func init() { register(44, 0, 1, handleIncrementalAlterConfigs) }

const (
	opSet      = 0
	opDelete   = 1
	opAppend   = 2
	opSubtract = 3
)

func handleIncrementalAlterConfigs(s *Server, r *request) (result, error) {
	req := r.req.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		var ops []configOp
		for _, c := range rr.Configs {
			ops = append(ops, configOp{name: c.Name, op: int8(c.Op), value: c.Value})
		}
		err := s.alterTopicConfigs(rr.ResourceType, rr.ResourceName, ops, false, req.ValidateOnly)
		setAlterErr(&sr.ErrorCode, &sr.ErrorMessage, err)
		resp.Resources = append(resp.Resources, sr)
	}
	return respond(resp)
}

// configOp is one change to one config.
type configOp struct {
	name  string
	op    int8
	value *string
}

// alterTopicConfigs applies ops to a topic's configs. With replace (the
// legacy AlterConfigs), configs the ops do not name are removed.
func (s *Server) alterTopicConfigs(rtype kmsg.ConfigResourceType, name string, ops []configOp, replace, validateOnly bool) error {
	switch rtype {
	case resourceTopic:
	case resourceBroker:
		return kerrMsg(kerr.InvalidRequest, "dynamic broker configs are not supported; set them in server.properties")
	default:
		return kerrMsg(kerr.InvalidRequest, "unsupported resource type")
	}
	t, ok := s.meta.Image().Topic(name)
	if !ok {
		return kerrMsg(kerr.UnknownTopicOrPartition, "topic "+name+" does not exist")
	}
	next := make(map[string]string, len(t.Configs))
	if !replace {
		for k, v := range t.Configs {
			next[k] = v
		}
	}
	seen := make(map[string]bool)
	for _, o := range ops {
		if seen[o.name] {
			return kerrMsg(kerr.InvalidRequest, "config "+o.name+" named more than once")
		}
		seen[o.name] = true
		typ, known := config.TopicConfigType(o.name)
		if !known {
			return kerrMsg(kerr.InvalidConfig, "unknown topic config name: "+o.name)
		}
		switch o.op {
		case opSet:
			if o.value == nil {
				return kerrMsg(kerr.InvalidRequest, "null value for config "+o.name)
			}
			next[o.name] = *o.value
		case opDelete:
			delete(next, o.name)
		case opAppend, opSubtract:
			if typ != config.TypeList {
				return kerrMsg(kerr.InvalidConfig, "config "+o.name+" is not a list: APPEND and SUBTRACT do not apply")
			}
			cur := splitList(next[o.name])
			if _, set := next[o.name]; !set {
				cur = splitList(s.defaultTopicConfig(o.name))
			}
			for _, v := range splitList(deref(o.value)) {
				i := slices.Index(cur, v)
				switch {
				case o.op == opAppend && i < 0:
					cur = append(cur, v)
				case o.op == opSubtract && i >= 0:
					cur = slices.Delete(cur, i, i+1)
				}
			}
			next[o.name] = strings.Join(cur, ",")
		default:
			return kerrMsg(kerr.InvalidRequest, "unknown config operation")
		}
	}
	if err := config.ValidateTopicConfigs(next); err != nil {
		return kerrMsg(kerr.InvalidConfig, err.Error())
	}
	set := make(map[string]*string)
	for k, v := range next {
		if old, ok := t.Configs[k]; !ok || old != v {
			set[k] = &v
		}
	}
	for k := range t.Configs {
		if _, ok := next[k]; !ok {
			set[k] = nil
		}
	}
	if len(set) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	if err := s.ctrl.AlterConfigs(ctx, resourceTopic, name, set, validateOnly); err != nil {
		return err
	}
	if !validateOnly {
		if err := s.reconcile(s.meta.Image()); err != nil {
			s.log.Error("apply metadata", "err", err)
		}
	}
	return nil
}

// defaultTopicConfig is the value a topic without an override has: the
// broker's property, else Kafka's default.
func (s *Server) defaultTopicConfig(name string) string {
	for _, e := range s.cfg.DescribeTopic(nil) {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// kerrMsg is a Kafka error with a message for the client.
func kerrMsg(ke *kerr.Error, msg string) error { return &codedError{ke, msg} }

type codedError struct {
	ke  *kerr.Error
	msg string
}

func (e *codedError) Error() string { return e.msg }
func (e *codedError) Unwrap() error { return e.ke }

// setAlterErr fills an answer's error code and message from err.
func setAlterErr(code *int16, msg **string, err error) {
	if err == nil {
		return
	}
	*code = errCode(err)
	m := err.Error()
	*msg = &m
}
