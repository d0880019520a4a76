package image

import (
	"cmp"
	"fmt"
	"iter"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/gregorbroker/gregor/internal/cowmap"
)

// Image is an immutable view of the cluster metadata at one offset of the
// metadata log. Applying records returns a new Image and leaves the old one
// untouched, so readers hold an *Image without locks. Nothing reachable from
// an Image (slices, maps, structs) may be modified by its readers.
type Image struct {
	// ClusterID is the cluster's ID (Kafka's cluster.id).
	ClusterID string

	offset         uint64
	topics         topicsByName
	topicIDs       topicsByID
	normNames      namesByNorm // unified name -> topic, for names with '.' or '_'
	brokers        map[int32]*BrokerImage
	brokerConfigs  map[string]map[string]string
	groupConfigs   map[string]map[string]string // by group id (KIP-848/932 group configs)
	nextProducerID int64
	features       map[string]int16
	scram          map[ScramKey]ScramCredential       // SCRAM credentials (scram.go)
	quotas         map[QuotaEntity]map[string]float64 // client quotas (quota.go)
	acls           *ACLs                              // nil: none
}

// TopicImage is one topic. It is shared between images until a record
// changes it, so a reader can tell a changed topic by pointer inequality.
type TopicImage struct {
	Name string
	ID   [16]byte
	// Partitions is indexed by partition number.
	Partitions []PartitionImage
	// Configs holds the topic's config overrides.
	Configs map[string]string
}

// PartitionImage is one partition's replica assignment and leadership.
// During a reassignment Replicas holds the target replicas followed by
// the ones being removed; AddingReplicas and RemovingReplicas (nil when
// no reassignment is in progress) say which are which.
type PartitionImage struct {
	Partition        int32
	Replicas         []int32
	ISR              []int32
	Leader           int32
	LeaderEpoch      int32
	PartitionEpoch   int32
	AddingReplicas   []int32
	RemovingReplicas []int32
}

// Reassigning reports whether a reassignment of the partition is in
// progress.
func (p *PartitionImage) Reassigning() bool {
	return len(p.AddingReplicas) > 0 || len(p.RemovingReplicas) > 0
}

// BrokerImage is a registered broker.
type BrokerImage struct {
	ID            int32
	IncarnationID [16]byte
	Epoch         int64
	Listeners     []Listener
	Rack          *string
	Fenced        bool
}

// NewImage returns the empty image of a cluster, at offset 0.
func NewImage(clusterID string) *Image {
	return &Image{
		ClusterID:     clusterID,
		topics:        cowmap.New[string, *TopicImage, cowmap.Strings](),
		topicIDs:      cowmap.New[[16]byte, *TopicImage, idShard](),
		normNames:     cowmap.New[string, string, cowmap.Strings](),
		brokers:       map[int32]*BrokerImage{},
		brokerConfigs: map[string]map[string]string{},
		groupConfigs:  map[string]map[string]string{},
		features:      map[string]int16{},
	}
}

// Offset returns the raft index of the last log entry applied to the image.
func (img *Image) Offset() uint64 { return img.offset }

// Topic returns the topic with the given name.
func (img *Image) Topic(name string) (*TopicImage, bool) {
	t, ok := img.topics.Get(name)
	return t, ok
}

// TopicByID returns the topic with the given ID.
func (img *Image) TopicByID(id [16]byte) (*TopicImage, bool) {
	t, ok := img.topicIDs.Get(id)
	return t, ok
}

// NumTopics returns the number of topics.
func (img *Image) NumTopics() int { return img.topics.Len() }

// TopicNames returns the names of all topics, sorted.
func (img *Image) TopicNames() []string {
	names := slices.Collect(img.topics.Keys())
	sort.Strings(names)
	return names
}

// ChangedTopicNames yields, in no particular order, the name of every
// topic created, deleted or changed (a different *TopicImage) between
// prev (nil for the empty image) and img. It relies on images sharing
// what Apply did not change, and costs the changed topics' shards of
// the topic map (topics/128 entries each), not a pass over every topic
// as DiffTopics does: the broker's metadata watcher calls it on every
// metadata change.
func (img *Image) ChangedTopicNames(prev *Image) iter.Seq[string] {
	if prev == nil {
		prev = NewImage(img.ClusterID)
	}
	return cowmap.ChangedKeys(prev.topics, img.topics)
}

// Topics returns all topics sorted by name.
func (img *Image) Topics() []*TopicImage {
	ts := slices.Collect(img.topics.Values())
	slices.SortFunc(ts, func(a, b *TopicImage) int { return strings.Compare(a.Name, b.Name) })
	return ts
}

// AllTopics yields every topic in no particular order, for a reader that
// needs no sorting.
func (img *Image) AllTopics() iter.Seq[*TopicImage] {
	return img.topics.Values()
}

// CollidingTopic returns an existing topic whose name differs from name but
// is the same once '.' is replaced by '_' (Kafka refuses such a topic
// because their metric names would be the same).
func (img *Image) CollidingTopic(name string) (string, bool) {
	if !HasCollisionChars(name) {
		return "", false
	}
	other, ok := img.normNames.Get(UnifyCollisionChars(name))
	if !ok || other == name {
		return "", false
	}
	return other, true
}

// Broker returns the registered broker with the given ID.
func (img *Image) Broker(id int32) (*BrokerImage, bool) {
	b, ok := img.brokers[id]
	return b, ok
}

// NumBrokers returns the number of registered brokers.
func (img *Image) NumBrokers() int { return len(img.brokers) }

// Brokers returns all registered brokers sorted by ID.
func (img *Image) Brokers() []*BrokerImage {
	bs := slices.Collect(maps.Values(img.brokers))
	slices.SortFunc(bs, func(a, b *BrokerImage) int { return cmp.Compare(a.ID, b.ID) })
	return bs
}

// Listener returns the broker's listener with the given name.
func (b *BrokerImage) Listener(name string) (Listener, bool) {
	for _, l := range b.Listeners {
		if l.Name == name {
			return l, true
		}
	}
	return Listener{}, false
}

// UnfencedBrokerIDs returns the IDs of the registered, unfenced brokers,
// sorted.
func (img *Image) UnfencedBrokerIDs() []int32 {
	var ids []int32
	for id, b := range img.brokers {
		if !b.Fenced {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// BrokerConfig returns one config override of a broker ("" for the
// cluster-wide default), without copying its map.
func (img *Image) BrokerConfig(broker, name string) (string, bool) {
	v, ok := img.brokerConfigs[broker][name]
	return v, ok
}

// BrokerConfigs returns a copy of the config overrides of one broker ("" for
// the cluster-wide default).
func (img *Image) BrokerConfigs(name string) map[string]string {
	return maps.Clone(img.brokerConfigs[name])
}

// GroupConfigs returns a copy of the config overrides of one group
// (share.auto.offset.reset, share.isolation.level, …).
func (img *Image) GroupConfigs(group string) map[string]string {
	return maps.Clone(img.groupConfigs[group])
}

// GroupConfig returns one config override of a group, without copying its
// map.
func (img *Image) GroupConfig(group, name string) (string, bool) {
	v, ok := img.groupConfigs[group][name]
	return v, ok
}

// NextProducerID returns the first producer ID not yet handed out.
func (img *Image) NextProducerID() int64 { return img.nextProducerID }

// Feature returns a feature's finalized level.
func (img *Image) Feature(name string) (int16, bool) {
	l, ok := img.features[name]
	return l, ok
}

// Features returns a copy of all finalized feature levels.
func (img *Image) Features() map[string]int16 { return maps.Clone(img.features) }

// Apply returns the image after applying recs, in order, as the log entry at
// offset. The records apply atomically: on an error the receiver is returned
// unchanged with the error. Only the maps and topics the records touch are
// copied.
func (img *Image) Apply(offset uint64, recs ...Record) (*Image, error) {
	if offset < img.offset {
		return img, fmt.Errorf("apply at offset %d: image is already at %d", offset, img.offset)
	}
	b := newImageBuilder(img)
	for i, r := range recs {
		if err := b.apply(r); err != nil {
			return img, fmt.Errorf("apply record %d (%s) at offset %d: %w", i, r.Type(), offset, err)
		}
	}
	b.next.offset = offset
	return b.next, nil
}

// WithOffset returns the image moved to offset with no other change, for log
// entries that carry no records.
func (img *Image) WithOffset(offset uint64) *Image {
	if offset == img.offset {
		return img
	}
	next := *img
	next.offset = offset
	return &next
}

// imageBuilder applies records to a shallow copy of an image, cloning each
// map the first time a record writes to it and each topic the first time a
// record changes it.
type imageBuilder struct {
	next *Image

	ownTopics, ownBrokers, ownBrokerConfigs, ownFeatures bool
	ownScram, ownQuotas                                  bool
	ownACLs                                              bool
	ownGroupConfigs                                      bool
	ownedTopics                                          map[[16]byte]bool

	// The topic maps' writers, set up by topicsW.
	topics    cowmap.Writer[string, *TopicImage, cowmap.Strings]
	topicIDs  cowmap.Writer[[16]byte, *TopicImage, idShard]
	normNames cowmap.Writer[string, string, cowmap.Strings]
}

func newImageBuilder(base *Image) *imageBuilder {
	next := *base
	return &imageBuilder{next: &next}
}

func (b *imageBuilder) topicsW() {
	if !b.ownTopics {
		b.topics = cowmap.NewWriter(&b.next.topics)
		b.topicIDs = cowmap.NewWriter(&b.next.topicIDs)
		b.normNames = cowmap.NewWriter(&b.next.normNames)
		b.ownedTopics = map[[16]byte]bool{}
		b.ownTopics = true
	}
}

// topicW returns a topic that this builder may modify.
func (b *imageBuilder) topicW(id [16]byte) (*TopicImage, error) {
	t, ok := b.next.topicIDs.Get(id)
	if !ok {
		return nil, fmt.Errorf("unknown topic ID %s", UUIDString(id))
	}
	b.topicsW()
	if b.ownedTopics[id] {
		return t, nil
	}
	c := &TopicImage{
		Name:       t.Name,
		ID:         t.ID,
		Partitions: slices.Clone(t.Partitions),
		Configs:    maps.Clone(t.Configs),
	}
	b.topics.Set(c.Name, c)
	b.topicIDs.Set(c.ID, c)
	b.ownedTopics[id] = true
	return c, nil
}

func (b *imageBuilder) apply(r Record) error {
	switch r := r.(type) {
	case *TopicRecord:
		return b.applyTopic(r)
	case *PartitionRecord:
		return b.applyPartition(r)
	case *PartitionChangeRecord:
		return b.applyPartitionChange(r)
	case *RemoveTopicRecord:
		return b.applyRemoveTopic(r)
	case *ConfigRecord:
		return b.applyConfig(r)
	case *RegisterBrokerRecord:
		return b.applyRegisterBroker(r)
	case *BrokerRegistrationChangeRecord:
		return b.applyBrokerChange(r)
	case *AccessControlEntryRecord:
		return b.applyACL(r)
	case *RemoveAccessControlEntryRecord:
		return b.applyRemoveACL(r)
	case *ProducerIDsRecord:
		if r.NextProducerID <= b.next.nextProducerID {
			return fmt.Errorf("next producer ID %d does not advance past %d", r.NextProducerID, b.next.nextProducerID)
		}
		b.next.nextProducerID = r.NextProducerID
		return nil
	case *UserScramCredentialRecord:
		return b.applyScram(r)
	case *RemoveUserScramCredentialRecord:
		return b.applyRemoveScram(r)
	case *ClientQuotaRecord:
		return b.applyClientQuota(r)
	case *FeatureLevelRecord:
		if r.Name == "" || r.Level < 0 {
			return fmt.Errorf("invalid feature %q level %d", r.Name, r.Level)
		}
		if !b.ownFeatures {
			b.next.features = maps.Clone(b.next.features)
			b.ownFeatures = true
		}
		if r.Level == 0 {
			delete(b.next.features, r.Name)
		} else {
			b.next.features[r.Name] = r.Level
		}
		return nil
	default:
		return fmt.Errorf("unknown record %T", r)
	}
}

func (b *imageBuilder) applyTopic(r *TopicRecord) error {
	if err := ValidateTopicName(r.Name); err != nil {
		return err
	}
	if r.ID == ([16]byte{}) {
		return fmt.Errorf("topic %s has the zero topic ID", r.Name)
	}
	if _, ok := b.next.topics.Get(r.Name); ok {
		return fmt.Errorf("topic %s already exists", r.Name)
	}
	if _, ok := b.next.topicIDs.Get(r.ID); ok {
		return fmt.Errorf("topic ID %s already exists", UUIDString(r.ID))
	}
	if other, ok := b.next.CollidingTopic(r.Name); ok {
		return fmt.Errorf("topic %s collides with %s", r.Name, other)
	}
	b.topicsW()
	t := &TopicImage{Name: r.Name, ID: r.ID, Configs: map[string]string{}}
	b.topics.Set(t.Name, t)
	b.topicIDs.Set(t.ID, t)
	b.ownedTopics[t.ID] = true
	if HasCollisionChars(t.Name) {
		b.normNames.Set(UnifyCollisionChars(t.Name), t.Name)
	}
	return nil
}

// ValidatePartition checks a partition's replica state: a non-empty set of
// distinct, non-negative replicas, an ISR drawn from them and a leader that
// is one of them or NoLeader.
func ValidatePartition(replicas, isr []int32, leader int32) error {
	if len(replicas) == 0 {
		return fmt.Errorf("empty replica list")
	}
	for i, r := range replicas {
		if r < 0 {
			return fmt.Errorf("negative replica %d", r)
		}
		if slices.Contains(replicas[:i], r) {
			return fmt.Errorf("replica %d listed twice", r)
		}
	}
	for i, r := range isr {
		if !slices.Contains(replicas, r) || slices.Contains(isr[:i], r) {
			return fmt.Errorf("ISR %v is not a set drawn from replicas %v", isr, replicas)
		}
	}
	if leader != NoLeader && !slices.Contains(replicas, leader) {
		return fmt.Errorf("leader %d is not a replica in %v", leader, replicas)
	}
	return nil
}

// validateReassignment checks a partition's reassignment state: adding and
// removing replicas are distinct replicas and no replica is both.
func validateReassignment(replicas, adding, removing []int32) error {
	for _, set := range [][]int32{adding, removing} {
		for i, r := range set {
			if !slices.Contains(replicas, r) || slices.Contains(set[:i], r) {
				return fmt.Errorf("reassignment set %v is not drawn from replicas %v", set, replicas)
			}
		}
	}
	for _, r := range adding {
		if slices.Contains(removing, r) {
			return fmt.Errorf("replica %d is both being added and removed", r)
		}
	}
	return nil
}

// nonEmpty returns a copy of v, or nil for an empty v, so that an image
// holds nil for "no reassignment" however a record spelled it.
func nonEmpty(v []int32) []int32 {
	if len(v) == 0 {
		return nil
	}
	return slices.Clone(v)
}

func (b *imageBuilder) applyPartition(r *PartitionRecord) error {
	t, err := b.topicW(r.TopicID)
	if err != nil {
		return err
	}
	if r.Partition < 0 || int(r.Partition) > len(t.Partitions) {
		return fmt.Errorf("partition %d of %s: topic has %d partitions", r.Partition, t.Name, len(t.Partitions))
	}
	if err := ValidatePartition(r.Replicas, r.ISR, r.Leader); err != nil {
		return fmt.Errorf("partition %s-%d: %w", t.Name, r.Partition, err)
	}
	if err := validateReassignment(r.Replicas, r.AddingReplicas, r.RemovingReplicas); err != nil {
		return fmt.Errorf("partition %s-%d: %w", t.Name, r.Partition, err)
	}
	p := PartitionImage{
		Partition:        r.Partition,
		Replicas:         slices.Clone(r.Replicas),
		ISR:              slices.Clone(r.ISR),
		Leader:           r.Leader,
		LeaderEpoch:      r.LeaderEpoch,
		PartitionEpoch:   r.PartitionEpoch,
		AddingReplicas:   nonEmpty(r.AddingReplicas),
		RemovingReplicas: nonEmpty(r.RemovingReplicas),
	}
	if p.ISR == nil {
		p.ISR = []int32{}
	}
	if int(r.Partition) == len(t.Partitions) {
		t.Partitions = append(t.Partitions, p)
	} else {
		t.Partitions[r.Partition] = p
	}
	return nil
}

func (b *imageBuilder) applyPartitionChange(r *PartitionChangeRecord) error {
	t, err := b.topicW(r.TopicID)
	if err != nil {
		return err
	}
	if r.Partition < 0 || int(r.Partition) >= len(t.Partitions) {
		return fmt.Errorf("partition %d of %s: topic has %d partitions", r.Partition, t.Name, len(t.Partitions))
	}
	p := t.Partitions[r.Partition]
	if r.Replicas != nil {
		p.Replicas = slices.Clone(r.Replicas)
	}
	if r.ISR != nil {
		p.ISR = slices.Clone(r.ISR)
	}
	if r.AddingReplicas != nil {
		p.AddingReplicas = nonEmpty(r.AddingReplicas)
	}
	if r.RemovingReplicas != nil {
		p.RemovingReplicas = nonEmpty(r.RemovingReplicas)
	}
	if r.Leader != NoLeaderChange {
		if r.Leader < NoLeader {
			return fmt.Errorf("partition %s-%d: invalid leader %d", t.Name, r.Partition, r.Leader)
		}
		p.LeaderEpoch++
		p.Leader = r.Leader
	}
	if err := ValidatePartition(p.Replicas, p.ISR, p.Leader); err != nil {
		return fmt.Errorf("partition %s-%d: %w", t.Name, r.Partition, err)
	}
	if err := validateReassignment(p.Replicas, p.AddingReplicas, p.RemovingReplicas); err != nil {
		return fmt.Errorf("partition %s-%d: %w", t.Name, r.Partition, err)
	}
	p.PartitionEpoch++
	t.Partitions[r.Partition] = p
	return nil
}

func (b *imageBuilder) applyRemoveTopic(r *RemoveTopicRecord) error {
	t, ok := b.next.topicIDs.Get(r.TopicID)
	if !ok {
		return fmt.Errorf("unknown topic ID %s", UUIDString(r.TopicID))
	}
	b.topicsW()
	b.topics.Delete(t.Name)
	b.topicIDs.Delete(t.ID)
	delete(b.ownedTopics, t.ID)
	if HasCollisionChars(t.Name) {
		b.normNames.Delete(UnifyCollisionChars(t.Name))
	}
	return nil
}

func (b *imageBuilder) applyConfig(r *ConfigRecord) error {
	if r.Name == "" {
		return fmt.Errorf("config with an empty name")
	}
	switch r.ResourceType {
	case ResourceTopic:
		t, ok := b.next.topics.Get(r.ResourceName)
		if !ok {
			return fmt.Errorf("config %s of unknown topic %s", r.Name, r.ResourceName)
		}
		t, err := b.topicW(t.ID)
		if err != nil {
			return err
		}
		setConfig(t.Configs, r.Name, r.Value)
		return nil
	case ResourceBroker:
		if !b.ownBrokerConfigs {
			b.next.brokerConfigs = maps.Clone(b.next.brokerConfigs)
			b.ownBrokerConfigs = true
		}
		cfg := maps.Clone(b.next.brokerConfigs[r.ResourceName])
		if cfg == nil {
			cfg = map[string]string{}
		}
		setConfig(cfg, r.Name, r.Value)
		if len(cfg) == 0 {
			delete(b.next.brokerConfigs, r.ResourceName)
		} else {
			b.next.brokerConfigs[r.ResourceName] = cfg
		}
		return nil
	case ResourceGroup:
		if !b.ownGroupConfigs {
			b.next.groupConfigs = maps.Clone(b.next.groupConfigs)
			b.ownGroupConfigs = true
		}
		cfg := maps.Clone(b.next.groupConfigs[r.ResourceName])
		if cfg == nil {
			cfg = map[string]string{}
		}
		setConfig(cfg, r.Name, r.Value)
		if len(cfg) == 0 {
			delete(b.next.groupConfigs, r.ResourceName)
		} else {
			b.next.groupConfigs[r.ResourceName] = cfg
		}
		return nil
	default:
		return fmt.Errorf("config %s of unsupported resource type %d", r.Name, r.ResourceType)
	}
}

func setConfig(m map[string]string, name string, value *string) {
	if value == nil {
		delete(m, name)
	} else {
		m[name] = *value
	}
}

func (b *imageBuilder) brokersW() {
	if !b.ownBrokers {
		b.next.brokers = maps.Clone(b.next.brokers)
		b.ownBrokers = true
	}
}

func (b *imageBuilder) applyRegisterBroker(r *RegisterBrokerRecord) error {
	if r.BrokerID < 0 {
		return fmt.Errorf("invalid broker ID %d", r.BrokerID)
	}
	if old, ok := b.next.brokers[r.BrokerID]; ok && r.Epoch <= old.Epoch {
		return fmt.Errorf("broker %d registration epoch %d does not advance past %d", r.BrokerID, r.Epoch, old.Epoch)
	}
	b.brokersW()
	b.next.brokers[r.BrokerID] = &BrokerImage{
		ID:            r.BrokerID,
		IncarnationID: r.IncarnationID,
		Epoch:         r.Epoch,
		Listeners:     slices.Clone(r.Listeners),
		Rack:          cloneString(r.Rack),
		Fenced:        r.Fenced,
	}
	return nil
}

func (b *imageBuilder) applyBrokerChange(r *BrokerRegistrationChangeRecord) error {
	old, ok := b.next.brokers[r.BrokerID]
	if !ok {
		return fmt.Errorf("broker %d is not registered", r.BrokerID)
	}
	if old.Epoch != r.BrokerEpoch {
		return fmt.Errorf("broker %d epoch %d is not the registered epoch %d", r.BrokerID, r.BrokerEpoch, old.Epoch)
	}
	b.brokersW()
	c := *old
	c.Fenced = r.Fenced
	b.next.brokers[r.BrokerID] = &c
	return nil
}

func cloneString(s *string) *string {
	if s == nil {
		return nil
	}
	c := *s
	return &c
}

// TopicsDiff lists how the topics of one image differ from an earlier one.
// Each list is sorted by name.
type TopicsDiff struct {
	// Created holds topics whose IDs the earlier image lacks.
	Created []*TopicImage
	// Deleted holds topics of the earlier image whose IDs are gone.
	Deleted []*TopicImage
	// Changed holds topics present in both whose partitions or configs
	// changed (new partitions, leaders, ISRs, epochs, configs).
	Changed []*TopicImage
}

// DiffTopics compares the topics of prev (nil for none) and next. It relies
// on unchanged topics being shared between images, so it costs one map
// lookup per topic.
func DiffTopics(prev, next *Image) TopicsDiff {
	var d TopicsDiff
	prevIDs := cowmap.New[[16]byte, *TopicImage, idShard]()
	if prev != nil {
		prevIDs = prev.topicIDs
	}
	for id, t := range next.topicIDs.All() {
		old, ok := prevIDs.Get(id)
		switch {
		case !ok:
			d.Created = append(d.Created, t)
		case old != t:
			d.Changed = append(d.Changed, t)
		}
	}
	for id, t := range prevIDs.All() {
		if _, ok := next.topicIDs.Get(id); !ok {
			d.Deleted = append(d.Deleted, t)
		}
	}
	byName := func(a, b *TopicImage) int { return strings.Compare(a.Name, b.Name) }
	slices.SortFunc(d.Created, byName)
	slices.SortFunc(d.Deleted, byName)
	slices.SortFunc(d.Changed, byName)
	return d
}
