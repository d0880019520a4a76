package broker

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/broker/group"
	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/raftmeta/image"
)

// Group configs (ConfigResource type GROUP, KIP-848 and KIP-932): overrides
// of the group.share.* broker configs for one group, and the group-only
// share.auto.offset.reset and share.isolation.level. As in Kafka they live
// in the metadata log (ConfigRecord of resource type 32) and change
// through IncrementalAlterConfigs; the share coordinator reads them from
// the image when it needs them (shares.go).

// groupConfigDef is one group config: its check and the broker default.
type groupConfigDef struct {
	name  string
	typ   int8
	check func(v string) bool
	dflt  func(c *config.Broker) string
	doc   string
}

// groupConfigList splits a list config as Kafka's ConfigDef: comma separated,
// blanks around items trimmed, empty for a blank value.
func groupConfigList(v string) []string {
	v = strings.TrimSpace(v)
	if v == "" {
		return []string{}
	}
	out := strings.Split(v, ",")
	for i := range out {
		out[i] = strings.TrimSpace(out[i])
	}
	return out
}

// distinctList is Kafka's ValidList.anyNonDuplicateValues(true, false):
// any items, none twice.
func distinctList(v string) bool {
	items := groupConfigList(v)
	seen := make(map[string]bool, len(items))
	for _, s := range items {
		if seen[s] {
			return false
		}
		seen[s] = true
	}
	return true
}

func intIn64(lo, hi int64) func(string) bool {
	return func(v string) bool {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		return err == nil && n >= lo && n <= hi
	}
}

func intIn(lo, hi int64) func(string) bool {
	return func(v string) bool {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		return err == nil && n >= lo && n <= hi
	}
}

func oneOf(vals ...string) func(string) bool {
	return func(v string) bool { return slices.Contains(vals, strings.ToLower(strings.TrimSpace(v))) }
}

// groupConfigDefs are the group configs Gregor applies; Kafka's others
// (the other consumer.*, the other streams.*, share.partition.max.record.locks, …) answer
// INVALID_CONFIG rather than being accepted and ignored.
var groupConfigDefs = []groupConfigDef{
	{"share.auto.offset.reset", config.TypeString, oneOf("latest", "earliest"),
		func(*config.Broker) string { return "latest" },
		"Where a share group starts consuming a partition it has no state for: latest or earliest."},
	{"share.isolation.level", config.TypeString, oneOf("read_committed", "read_uncommitted"),
		func(*config.Broker) string { return "read_uncommitted" },
		"Whether a share group skips the records of aborted transactions (read_committed)."},
	{"share.record.lock.duration.ms", config.TypeInt, intIn(1000, 3_600_000),
		func(c *config.Broker) string { return strconv.Itoa(int(c.GroupShareRecordLockDurationMs)) },
		"The group's acquisition lock duration."},
	{"share.delivery.count.limit", config.TypeInt, intIn(2, 10),
		func(c *config.Broker) string { return strconv.Itoa(int(c.GroupShareDeliveryCountLimit)) },
		"The group's delivery count limit."},
	{"share.session.timeout.ms", config.TypeInt, intIn(1, 1<<31-1),
		func(c *config.Broker) string { return strconv.Itoa(int(c.GroupShareSessionTimeoutMs)) },
		"The session timeout of the group's share members."},
	{"share.heartbeat.interval.ms", config.TypeInt, intIn(1, 1<<31-1),
		func(c *config.Broker) string { return strconv.Itoa(int(c.GroupShareHeartbeatIntervalMs)) },
		"The heartbeat interval of the group's share members."},
	{"consumer.session.timeout.ms", config.TypeInt, intIn(1, 1<<31-1),
		func(c *config.Broker) string { return strconv.Itoa(int(c.GroupConsumerSessionTimeoutMs)) },
		"The session timeout of the group's consumer-protocol members."},
	{"consumer.heartbeat.interval.ms", config.TypeInt, intIn(1, 1<<31-1),
		func(c *config.Broker) string { return strconv.Itoa(int(c.GroupConsumerHeartbeatIntervalMs)) },
		"The heartbeat interval of the group's consumer-protocol members."},
	{"consumer.assignment.interval.ms", config.TypeInt, intIn(0, 1<<31-1),
		func(c *config.Broker) string { return strconv.Itoa(int(c.GroupConsumerAssignmentIntervalMs)) },
		"The least time between two target assignments of the consumer group."},
	{"share.assignment.interval.ms", config.TypeInt, intIn(0, 1<<31-1),
		func(c *config.Broker) string { return strconv.Itoa(int(c.GroupShareAssignmentIntervalMs)) },
		"The least time between two target assignments of the share group."},
	{"streams.session.timeout.ms", config.TypeInt, intIn(1, 1<<31-1),
		func(c *config.Broker) string { return strconv.Itoa(int(c.GroupStreamsSessionTimeoutMs)) },
		"The session timeout of the group's streams members."},
	{"streams.heartbeat.interval.ms", config.TypeInt, intIn(1, 1<<31-1),
		func(c *config.Broker) string { return strconv.Itoa(int(c.GroupStreamsHeartbeatIntervalMs)) },
		"The heartbeat interval of the group's streams members."},
	{"streams.num.standby.replicas", config.TypeInt, intIn(0, 1<<31-1),
		func(c *config.Broker) string { return strconv.Itoa(int(c.GroupStreamsNumStandbyReplicas)) },
		"The standby replicas of each stateful task of the streams group."},
	{"streams.initial.rebalance.delay.ms", config.TypeInt, intIn(0, 1<<31-1),
		func(c *config.Broker) string { return strconv.Itoa(int(c.GroupStreamsInitialRebalanceDelay)) },
		"How long the first assignment of the streams group waits for more members."},
	{"streams.assignment.interval.ms", config.TypeInt, intIn(0, 1<<31-1),
		func(c *config.Broker) string { return strconv.Itoa(int(c.GroupStreamsAssignmentIntervalMs)) },
		"The least time between two target assignments of the streams group."},
	{"streams.rack.aware.assignment.tags", config.TypeList, distinctList,
		func(c *config.Broker) string { return strings.Join(c.GroupStreamsRackAwareAssignmentTags, ",") },
		"Client tag keys every member of the streams group must set."},
	{"streams.task.offset.interval.ms", config.TypeInt, intIn(1, 1<<31-1),
		func(c *config.Broker) string { return strconv.Itoa(int(c.GroupStreamsTaskOffsetIntervalMs)) },
		"How often the streams group's members report their tasks' changelog offsets."},
	{"streams.acceptable.recovery.lag", config.TypeLong, intIn64(0, math.MaxInt64),
		func(c *config.Broker) string { return strconv.FormatInt(c.GroupStreamsAcceptableRecoveryLag, 10) },
		"The changelog lag up to which a member counts as caught up for a task; passed on to the streams group's members."},
}

// groupConfigBounds are the group configs whose bounds are broker configs,
// as Kafka's GroupConfig.validate checks them.
var groupConfigBounds = map[string]func(c *config.Broker) (lo, hi int64){
	"share.assignment.interval.ms": func(c *config.Broker) (int64, int64) {
		return int64(c.GroupShareMinAssignmentIntervalMs), int64(c.GroupShareMaxAssignmentIntervalMs)
	},
	"consumer.session.timeout.ms": func(c *config.Broker) (int64, int64) {
		return int64(c.GroupConsumerMinSessionTimeoutMs), int64(c.GroupConsumerMaxSessionTimeoutMs)
	},
	"consumer.heartbeat.interval.ms": func(c *config.Broker) (int64, int64) {
		return int64(c.GroupConsumerMinHeartbeatIntervalMs), int64(c.GroupConsumerMaxHeartbeatIntervalMs)
	},
	"consumer.assignment.interval.ms": func(c *config.Broker) (int64, int64) {
		return int64(c.GroupConsumerMinAssignmentIntervalMs), int64(c.GroupConsumerMaxAssignmentIntervalMs)
	},
	"streams.session.timeout.ms": func(c *config.Broker) (int64, int64) {
		return int64(c.GroupStreamsMinSessionTimeoutMs), int64(c.GroupStreamsMaxSessionTimeoutMs)
	},
	"streams.heartbeat.interval.ms": func(c *config.Broker) (int64, int64) {
		return int64(c.GroupStreamsMinHeartbeatIntervalMs), int64(c.GroupStreamsMaxHeartbeatIntervalMs)
	},
	"streams.num.standby.replicas": func(c *config.Broker) (int64, int64) {
		return 0, int64(c.GroupStreamsMaxStandbyReplicas)
	},
	"streams.task.offset.interval.ms": func(c *config.Broker) (int64, int64) {
		return int64(c.GroupStreamsMinTaskOffsetIntervalMs), 1<<31 - 1
	},
	"streams.assignment.interval.ms": func(c *config.Broker) (int64, int64) {
		return int64(c.GroupStreamsMinAssignmentIntervalMs), int64(c.GroupStreamsMaxAssignmentIntervalMs)
	},
}

func groupConfigDefOf(name string) (groupConfigDef, bool) {
	for _, d := range groupConfigDefs {
		if d.name == name {
			return d, true
		}
	}
	return groupConfigDef{}, false
}

// alterGroupConfigs applies IncrementalAlterConfigs operations (SET and
// DELETE; group configs are no lists) to a group's configs, checked as
// Kafka's GroupConfig.validate, and commits them to the metadata log.
func (s *Server) alterGroupConfigs(name string, ops []configOp, validateOnly bool) error {
	if name == "" {
		return kerrMsg(kerr.InvalidRequest, "Group name must not be empty")
	}
	set := map[string]*string{}
	for _, o := range ops {
		d, ok := groupConfigDefOf(o.name)
		if !ok {
			return kerrMsg(kerr.InvalidConfig, "Unknown group config name: "+o.name)
		}
		switch o.op {
		case opSet:
			if !d.check(*o.value) {
				return kerrMsg(kerr.InvalidConfig, "Invalid value "+*o.value+" for configuration "+o.name)
			}
			if bounds := groupConfigBounds[o.name]; bounds != nil {
				lo, hi := bounds(s.cfg)
				if !intIn(lo, hi)(*o.value) {
					return kerrMsg(kerr.InvalidConfig, fmt.Sprintf("%s must be between %d and %d", o.name, lo, hi))
				}
			}
			// List items (client tag keys) keep their case.
			v := strings.TrimSpace(*o.value)
			if d.typ != config.TypeList {
				v = strings.ToLower(v)
			}
			set[o.name] = &v
		case opDelete:
			set[o.name] = nil
		default:
			return kerrMsg(kerr.InvalidConfig, "Config "+o.name+" is not a list: APPEND and SUBTRACT do not apply")
		}
	}
	if err := s.checkGroupTimeouts(name, set); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	return s.ctrl.AlterConfigs(ctx, image.ResourceGroup, name, set, validateOnly)
}

// groupTimeoutPairs are the session timeouts that Kafka's
// GroupConfig.validate requires above their heartbeat intervals.
var groupTimeoutPairs = [][2]string{
	{"consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"},
	{"share.session.timeout.ms", "share.heartbeat.interval.ms"},
	{"streams.session.timeout.ms", "streams.heartbeat.interval.ms"},
}

// checkGroupTimeouts checks the group's configs as they would be after
// set (nil deletes an override, back to the broker's default): each
// session timeout must be greater than its heartbeat interval, as Kafka's
// GroupConfig.validate.
func (s *Server) checkGroupTimeouts(group string, set map[string]*string) error {
	over := s.meta.Image().GroupConfigs(group)
	effective := func(name string) int64 {
		v, ok := over[name]
		if p, changed := set[name]; changed && p != nil {
			v, ok = *p, true
		} else if changed {
			ok = false // deleted: the broker's default
		}
		if !ok {
			d, _ := groupConfigDefOf(name)
			v = d.dflt(s.cfg)
		}
		n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		return n
	}
	for _, p := range groupTimeoutPairs {
		if effective(p[0]) <= effective(p[1]) {
			return kerrMsg(kerr.InvalidConfig, p[0]+" must be greater than "+p[1])
		}
	}
	return nil
}

// describeGroupConfigs lists every group config of a group: its override,
// or the broker's default.
func (s *Server) describeGroupConfigs(img *image.Image, name string) []config.Entry {
	over := img.GroupConfigs(name)
	var out []config.Entry
	for _, d := range groupConfigDefs {
		e := config.Entry{Name: d.name, Value: d.dflt(s.cfg), Source: config.SourceDefault, Type: d.typ, Doc: d.doc}
		if v, ok := over[d.name]; ok {
			e.Value, e.Source = v, sourceGroupConfig
		}
		out = append(out, e)
	}
	return out
}

// sourceGroupConfig is Kafka's ConfigSource GROUP_CONFIG.
const sourceGroupConfig = 8

// groupConfigLookup is the share coordinator's view of group configs.
func (s *Server) groupConfigLookup(group, name string) (string, bool) {
	return s.meta.Image().GroupConfig(group, name)
}

// groupConfigInt32 is the group's override of an int config, if it has
// one (its value was checked when it was set).
func groupConfigInt32(over map[string]string, name string) (int32, bool) {
	v, ok := over[name]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	return int32(n), err == nil
}

// consumerGroupOverrides are a consumer group's group configs, for the group
// coordinator; it calls this on its shards, so it only reads the image.
func (s *Server) consumerGroupOverrides(id string) group.ConsumerGroupOverrides {
	o := group.ConsumerGroupOverrides{AssignmentIntervalMs: -1}
	over := s.meta.Image().GroupConfigs(id)
	if len(over) == 0 {
		return o
	}
	num := func(name string) (int32, bool) { return groupConfigInt32(over, name) }
	if n, ok := num("consumer.assignment.interval.ms"); ok {
		o.AssignmentIntervalMs = n
	}
	if n, ok := num("consumer.session.timeout.ms"); ok {
		o.SessionTimeoutMs = n
	}
	if n, ok := num("consumer.heartbeat.interval.ms"); ok {
		o.HeartbeatIntervalMs = n
	}
	return o
}

// streamsGroupOverrides are a streams group's group configs, for the group
// coordinator; it calls this on its shards, so it only reads the image.
func (s *Server) streamsGroupOverrides(id string) group.StreamsGroupOverrides {
	o := group.StreamsGroupOverrides{NumStandbyReplicas: -1, InitialRebalanceDelayMs: -1, AssignmentIntervalMs: -1, TaskOffsetIntervalMs: -1, AcceptableRecoveryLag: -1}
	over := s.meta.Image().GroupConfigs(id)
	if len(over) == 0 {
		return o
	}
	num := func(name string) (int32, bool) { return groupConfigInt32(over, name) }
	if n, ok := num("streams.session.timeout.ms"); ok {
		o.SessionTimeoutMs = n
	}
	if n, ok := num("streams.heartbeat.interval.ms"); ok {
		o.HeartbeatIntervalMs = n
	}
	if n, ok := num("streams.num.standby.replicas"); ok {
		o.NumStandbyReplicas = n
	}
	if n, ok := num("streams.initial.rebalance.delay.ms"); ok {
		o.InitialRebalanceDelayMs = n
	}
	if n, ok := num("streams.assignment.interval.ms"); ok {
		o.AssignmentIntervalMs = n
	}
	if n, ok := num("streams.task.offset.interval.ms"); ok {
		o.TaskOffsetIntervalMs = n
	}
	if v, ok := over["streams.acceptable.recovery.lag"]; ok {
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			o.AcceptableRecoveryLag = n
		}
	}
	if v, ok := over["streams.rack.aware.assignment.tags"]; ok {
		o.RackAwareAssignmentTags = groupConfigList(v)
	}
	return o
}
