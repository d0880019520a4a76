package broker

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/raftmeta/image"
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
//
// Each resource is first checked as Kafka's broker does before it forwards
// the request (ConfigAdminManager.preprocess): a resource named twice,
// a config named twice, a null value (but for DELETE) and an unknown
// resource type answer INVALID_REQUEST; then as its controller does
// (ControllerConfigurationValidator, ConfigurationControlManager): the
// topic name, the resulting configs, and last whether the topic exists.
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
	dup := duplicateResources(len(req.Resources), func(i int) (int8, string) {
		return int8(req.Resources[i].ResourceType), req.Resources[i].ResourceName
	})
	for i, rr := range req.Resources {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		var ops []configOp
		for _, c := range rr.Configs {
			ops = append(ops, configOp{name: c.Name, op: int8(c.Op), value: c.Value})
		}
		err := errDuplicateResource
		if !dup[i] {
			err = s.auth(r).alterConfigsDenied(rr.ResourceType, rr.ResourceName)
		}
		if err == nil {
			err = s.alterConfigs(rr.ResourceType, rr.ResourceName, ops, false, req.ValidateOnly)
		}
		setAlterErr(&sr.ErrorCode, &sr.ErrorMessage, err)
		resp.Resources = append(resp.Resources, sr)
	}
	return respond(resp)
}

// errDuplicateResource answers each copy of a resource named more than
// once in one request (ConfigAdminManager.preprocess).
var errDuplicateResource = kerrMsg(kerr.InvalidRequest, "Each resource must appear at most once.")

// duplicateResources marks the resources of a request (n of them, each a
// type and a name) that appear more than once.
func duplicateResources(n int, key func(int) (int8, string)) []bool {
	type id struct {
		typ  int8
		name string
	}
	count := make(map[id]int, n)
	for i := range n {
		t, name := key(i)
		count[id{t, name}]++
	}
	dup := make([]bool, n)
	for i := range n {
		t, name := key(i)
		dup[i] = count[id{t, name}] > 1
	}
	return dup
}

// configOp is one change to one config.
type configOp struct {
	name  string
	op    int8
	value *string
}

// Config resource types Kafka knows (ConfigResource.Type) besides topics
// and brokers.
const (
	resourceClientMetrics = 16
	resourceBrokerLogger  = 8
	resourceGroup         = 32
)

// alterConfigs checks one resource of an AlterConfigs (legacy) or
// IncrementalAlterConfigs request as Kafka's broker does before it
// forwards the request (ConfigAdminManager.preprocess), then applies it
// to a topic, a broker (its own id, or "" for the cluster-wide defaults)
// or (incrementally) a group (group_configs.go). Broker loggers and
// client metrics are refused with
// INVALID_REQUEST rather than accepted and ignored.
func (s *Server) alterConfigs(rtype kmsg.ConfigResourceType, name string, ops []configOp, legacy, validateOnly bool) error {
	seen := make(map[string]bool)
	var nulls []string
	for _, o := range ops {
		if seen[o.name] {
			return kerrMsg(kerr.InvalidRequest, "Error due to duplicate config keys")
		}
		seen[o.name] = true
		if o.value == nil && (legacy || o.op != opDelete) {
			nulls = append(nulls, o.name)
		}
	}
	if len(nulls) > 0 {
		return kerrMsg(kerr.InvalidRequest, "Null value not supported for : "+strings.Join(nulls, ", "))
	}
	switch rtype {
	case resourceTopic:
		return s.alterTopicConfigs(name, ops, legacy, validateOnly)
	case resourceBroker:
		if name != "" {
			if err := s.checkBrokerResourceName(name); err != nil {
				return err
			}
		}
		return s.alterBrokerConfigs(name, ops, legacy, validateOnly)
	case resourceBrokerLogger:
		if !legacy {
			return kerrMsg(kerr.InvalidRequest, "changing broker log levels is not supported")
		}
	case resourceGroup:
		if legacy {
			return kerrMsg(kerr.InvalidRequest, "group configs change through IncrementalAlterConfigs")
		}
		return s.alterGroupConfigs(name, ops, validateOnly)
	case resourceClientMetrics:
		return kerrMsg(kerr.InvalidRequest, "client metrics configs are not supported")
	}
	return kerrMsg(kerr.InvalidRequest, "Unknown resource type "+strconv.Itoa(int(rtype)))
}

// checkBrokerResourceName is ConfigAdminManager.validateResourceNameIsCurrentNodeId.
func (s *Server) checkBrokerResourceName(name string) error {
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil {
		return kerrMsg(kerr.InvalidRequest, "Node id must be an integer, but it is: "+name)
	}
	if int32(id) != s.cfg.NodeID {
		return kerrMsg(kerr.InvalidRequest, fmt.Sprintf("Unexpected broker id, expected %d, but received %s", s.cfg.NodeID, name))
	}
	return nil
}

// alterTopicConfigs applies ops to a topic's configs, checked in the
// active controller's order (ConfigurationControlManager and
// ControllerConfigurationValidator): the name, then the resulting
// configs, then whether the topic exists. With replace (the legacy
// AlterConfigs), configs the ops do not name are removed.
func (s *Server) alterTopicConfigs(name string, ops []configOp, replace, validateOnly bool) error {
	if name == "" {
		return kerrMsg(kerr.InvalidRequest, "Default topic resources are not allowed.")
	}
	if err := image.ValidateTopicName(name); err != nil {
		return kerrMsg(kerr.InvalidTopicException, err.Error())
	}
	t, exists := s.meta.Image().Topic(name)
	current := map[string]string{}
	if exists {
		current = t.Configs
	}
	next := make(map[string]string, len(current))
	if !replace {
		for k, v := range current {
			next[k] = v
		}
	}
	for _, o := range ops {
		if err := s.applyConfigOp(next, o); err != nil {
			return err
		}
	}
	if err := config.ValidateTopicConfigs(next); err != nil {
		return kerrMsg(kerr.InvalidConfig, err.Error())
	}
	if !exists {
		return kerrMsg(kerr.UnknownTopicOrPartition, "topic "+name+" does not exist")
	}
	set := make(map[string]*string)
	for k, v := range next {
		if old, ok := current[k]; !ok || old != v {
			set[k] = &v
		}
	}
	for k := range current {
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
		changed := make(map[string]string, len(set))
		for k, v := range set {
			if v != nil {
				changed[k] = *v
			}
		}
		s.warnUnsupportedTopicConfigs(name, changed)
	}
	return nil
}

// applyConfigOp applies one operation to a topic's would-be configs.
func (s *Server) applyConfigOp(next map[string]string, o configOp) error {
	typ, known := config.TopicConfigType(o.name)
	if !known {
		return kerrMsg(kerr.InvalidConfig, "unknown topic config name: "+o.name)
	}
	switch o.op {
	case opSet:
		next[o.name] = *o.value
	case opDelete:
		delete(next, o.name)
	case opAppend, opSubtract:
		if typ != config.TypeList {
			return kerrMsg(kerr.InvalidConfig, "Can't "+opName(o.op)+" to key "+o.name+" because its type is not LIST.")
		}
		cur := splitList(next[o.name])
		if _, set := next[o.name]; !set {
			cur = splitList(s.defaultTopicConfig(o.name))
		}
		for _, v := range splitList(*o.value) {
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
		return kerrMsg(kerr.InvalidRequest, "unknown config operation "+strconv.Itoa(int(o.op)))
	}
	return nil
}

func opName(op int8) string {
	if op == opAppend {
		return "APPEND"
	}
	return "SUBTRACT"
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
