package broker

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/raftmeta/image"
)

// alterBrokerConfigs applies ops to the dynamic configs of the broker
// resource name (this broker's id, or "" for the cluster-wide defaults),
// as Kafka's ConfigAdminManager does on the broker before it forwards the
// change (prepareIncrementalConfigs, then DynamicBrokerConfig.validate):
// APPEND and SUBTRACT only for list configs (INVALID_CONFIG), then the
// whole resulting set checked (INVALID_REQUEST, with Kafka's message, for
// a config Gregor does not change at run time or a bad value). With
// replace (the legacy AlterConfigs), configs the ops do not name are
// removed. The change is a ConfigRecord per config in the metadata log,
// committed before the answer.
func (s *Server) alterBrokerConfigs(name string, ops []configOp, replace, validateOnly bool) error {
	current := s.meta.Image().BrokerConfigs(name)
	next := make(map[string]string, len(current))
	if !replace {
		for k, v := range current {
			next[k] = v
		}
	}
	for _, o := range ops {
		switch o.op {
		case opSet:
			next[o.name] = *o.value
		case opDelete:
			delete(next, o.name)
		case opAppend:
			return kerrMsg(kerr.InvalidConfig, "Config value append is not allowed for config key: "+o.name)
		case opSubtract:
			return kerrMsg(kerr.InvalidConfig, "Config value subtract is not allowed for config key: "+o.name)
		default:
			return kerrMsg(kerr.InvalidRequest, "Unknown operations type "+strconv.Itoa(int(o.op)))
		}
	}
	if err := config.ValidateDynamicBrokerConfigs(next, name != ""); err != nil {
		return kerrMsg(kerr.InvalidRequest, err.Error())
	}
	// The listeners whose key or trust store the ops name (a non-empty
	// name is this broker, checkBrokerResourceName saw to it): their new
	// stores must load before the change is accepted.
	named := map[string]bool{}
	for _, o := range ops {
		if l, ok := config.ListenerStoreKey(o.name); ok {
			named[strings.ToLower(l)] = true
		}
	}
	if name != "" && len(named) > 0 {
		if err := s.checkListenerStores(next, named); err != nil {
			return kerrMsg(kerr.InvalidRequest, "Validation of dynamic config update of SSLFactory failed: "+err.Error())
		}
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
		// Setting a store property to its current value re-reads the
		// files, as Kafka does for a per-broker change.
		if name != "" && !validateOnly {
			s.reloadListenerTLS(next, named)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	if err := s.ctrl.AlterConfigs(ctx, resourceBroker, name, set, validateOnly); err != nil {
		return err
	}
	if name != "" && !validateOnly {
		// The committed change is in this broker's image by now; read
		// it from there so the metadata watcher, which reloads from the
		// image too, agrees.
		s.reloadListenerTLS(s.meta.Image().BrokerConfigs(name), named)
	}
	return nil
}

// dynamicConfigs is the dynamic broker config layers that apply to this
// broker in img.
func (s *Server) dynamicConfigs(img *image.Image) config.Dynamic {
	return config.Dynamic{
		Node:    img.BrokerConfigs(strconv.Itoa(int(s.cfg.NodeID))),
		Cluster: img.BrokerConfigs(""),
	}
}
