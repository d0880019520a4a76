package controller

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/raftmeta/image"
	"github.com/gregorbroker/gregor/raftmeta/raftnode"
)

// Kafka's limits on one user operation (QuorumController.MAX_RECORDS_PER_USER_OP
// and ReplicationControlManager.MAX_PARTITIONS_PER_BATCH), which keep a
// single request from building an unbounded batch.
const (
	maxPartitionsPerRequest = 10000
	// ProducerIDBlockSize is how many producer IDs AllocateProducerIDs
	// hands out at once (Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE).
	ProducerIDBlockSize = 1000
)

// Controller is the active controller's request processor. One goroutine
// takes requests from a channel and handles them one at a time: it
// validates each against the newest image, proposes the resulting records
// and waits until they apply before taking the next, so no locks are held
// across requests and every request sees the effects of the ones before.
//
// CreateTopics is pipelined (pipeline.go): it is validated against the
// image plus the topics of the creations still in flight, its entry is
// submitted, and its commit is waited for outside the loop, so that
// concurrent creations share the metadata log's fsync. Every other
// request, and the periodic checks, first wait until no creation is in
// flight, so they still see the effects of every request before them.
// Every mutating call answers NOT_CONTROLLER unless the node is the active
// controller.
type Controller struct {
	node  *raftnode.Node
	log   *slog.Logger
	cfg   Config
	newID func() [16]byte // topic IDs; tests make them deterministic

	reqc     chan *request
	ctx      context.Context // canceled by Close
	cancel   context.CancelFunc
	donec    chan struct{}
	stopOnce sync.Once

	// Owned by the controller goroutine; reset whenever this node becomes
	// the active controller in a new term (see activate).
	term         uint64              // raft term the state below belongs to
	lastContact  map[int32]time.Time // last heartbeat (or registration) per broker
	shuttingDown map[int32]bool      // brokers in controlled shutdown
	// graceEnds holds the brokers that must heartbeat again soon, and by
	// when, or be fenced: those whose connection closed, and on
	// activation every broker (heartbeat.go). A heartbeat removes the
	// broker; the others keep the full session.
	graceEnds map[int32]time.Time
	// activeSince is when this node became the active controller, on the
	// controller's clock; quorumChecked says the brokers silent in the
	// quorum since then have been looked for (heartbeat.go).
	activeSince   time.Time
	quorumChecked bool
	nextBalance   time.Time // next preferred-leader and unclean check

	// arrivedMu guards arrived: when each broker's latest heartbeat
	// reached BrokerHeartbeat, with the epoch it carried, noted before
	// it waits for the controller goroutine. A goroutine held up (by a
	// slow commit under load) must not fence brokers whose heartbeats
	// are waiting behind it: fenceStale skips a broker with a heartbeat
	// newer than its lastContact, as Kafka's BrokerHeartbeatTracker
	// notes contact outside its event queue.
	arrivedMu sync.Mutex
	arrived   map[int32]heartbeatArrival

	// offline are the partitions each broker reported on offline log
	// dirs (offline_dirs.go); kept across terms, made when first needed.
	offline map[int32]*offlineReplicas

	// gone carries the brokers whose connections to this node closed
	// (PeerGone) to the controller goroutine.
	gone chan int32

	// The creations submitted and the overlay of their topics
	// (pipeline.go); owned by the controller goroutine, which forgets a
	// creation (settle) once its done is closed.
	inflight createOverlay
	pending  []*pendingCreate
}

// Config holds the settings of the active controller.
type Config struct {
	// BrokerSessionTimeout is broker.session.timeout.ms: a broker that
	// sends no heartbeat for this long is fenced. Zero turns broker
	// liveness off: brokers register unfenced and are never fenced, for a
	// process whose broker does not send heartbeats.
	BrokerSessionTimeout time.Duration
	// BrokerDisconnectGrace is broker.disconnect.grace.ms: a broker whose
	// last connection to the active controller closed (PeerGone) is
	// fenced unless it heartbeats again within this grace, rather than
	// after a whole session. A broker whose process died closes its
	// connections at once, a live one reconnects and heartbeats at once.
	// Zero turns this off: only the session timeout fences.
	BrokerDisconnectGrace time.Duration
	// BrokerHeartbeatInterval is broker.heartbeat.interval.ms. With a
	// disconnect grace, a newly active controller fences the brokers
	// that do not heartbeat to it within one interval and the grace
	// (every live broker does), instead of a whole session.
	BrokerHeartbeatInterval time.Duration
	// UncleanLeaderElection is the static default of
	// unclean.leader.election.enable, which a topic config or a cluster-wide
	// dynamic broker config overrides.
	UncleanLeaderElection bool
	// AutoLeaderRebalance is auto.leader.rebalance.enable.
	AutoLeaderRebalance bool
	// LeaderImbalanceCheckInterval is leader.imbalance.check.interval.seconds
	// (default 300 s). It also paces unclean elections of leaderless
	// partitions.
	LeaderImbalanceCheckInterval time.Duration
	// LeaderImbalancePerBrokerPercentage is
	// leader.imbalance.per.broker.percentage: a broker's preferred
	// partitions are moved back to it when more than this share of them is
	// led elsewhere. Zero rebalances any imbalance.
	LeaderImbalancePerBrokerPercentage int32
	// Now is the clock, time.Now if nil.
	Now func() time.Time
}

type request struct {
	ctx  context.Context
	fn   func()
	ran  bool // set before done closes
	done chan struct{}
	// pipelined requests (CreateTopics) run while creations are in
	// flight; every other request waits until none is.
	pipelined bool
}

// New starts the controller goroutine for node. It runs on every node and
// answers NOT_CONTROLLER while its node is not the active controller.
// Close it before the node.
func New(node *raftnode.Node, logger *slog.Logger, cfg Config) *Controller {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.LeaderImbalanceCheckInterval <= 0 {
		cfg.LeaderImbalanceCheckInterval = defaultImbalanceCheckInterval
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Controller{
		node:         node,
		log:          logger.With("component", "controller", "node", node.NodeID()),
		cfg:          cfg,
		newID:        image.NewUUID,
		reqc:         make(chan *request),
		ctx:          ctx,
		cancel:       cancel,
		donec:        make(chan struct{}),
		lastContact:  map[int32]time.Time{},
		shuttingDown: map[int32]bool{},
		graceEnds:    map[int32]time.Time{},
		arrived:      map[int32]heartbeatArrival{},
		gone:         make(chan int32, 64),
	}
	go c.run()
	return c
}

func (c *Controller) run() {
	defer close(c.donec)
	tick := time.NewTicker(c.periodicInterval())
	defer tick.Stop()
	// A node that has just become the active controller checks the
	// brokers at once rather than at the next tick: a dead old
	// controller's broker is fenced, and its partitions move, sooner.
	// Only a change of the active controller matters here, not each new
	// image (every CreateTopics makes one).
	active := c.node.ActiveChanges()
	for {
		select {
		case <-active:
			if c.node.IsLeader() && c.node.ActiveTerm() != c.term {
				c.awaitInflight()
				c.periodic()
			}
		case req := <-c.reqc:
			// A caller that has gone does not need its request done.
			if req.ctx.Err() == nil {
				if !req.pipelined {
					c.awaitInflight()
				}
				req.fn()
				req.ran = true
			}
			close(req.done)
		case id := <-c.gone:
			c.awaitInflight()
			c.peerGone(id)
		case <-tick.C:
			c.awaitInflight()
			c.periodic()
		case <-c.ctx.Done():
			return
		}
	}
}

// Close stops the controller goroutine. Calls in flight return errors.
func (c *Controller) Close() {
	c.stopOnce.Do(c.cancel)
	<-c.donec
}

// do runs fn on the controller goroutine. On a nil return fn has run and
// its writes are visible; otherwise fn must be treated as possibly still
// running and its outputs ignored.
func (c *Controller) do(ctx context.Context, fn func()) error {
	return c.doRequest(&request{ctx: ctx, fn: fn, done: make(chan struct{})})
}

// doRequest is do for a request made by the caller.
func (c *Controller) doRequest(req *request) error {
	ctx := req.ctx
	select {
	case c.reqc <- req:
	case <-ctx.Done():
		return timeoutError(ctx)
	case <-c.donec:
		return apiError(kerr.NotController, "the controller is shutting down")
	}
	select {
	case <-req.done:
	case <-ctx.Done():
		return timeoutError(ctx)
	case <-c.donec:
		// run closes req.done before it can return, unless it never took req.
		select {
		case <-req.done:
		default:
			return apiError(kerr.NotController, "the controller is shutting down")
		}
	}
	if !req.ran {
		return timeoutError(ctx)
	}
	return nil
}

func timeoutError(ctx context.Context) error {
	return &Error{Code: kerr.RequestTimedOut, Message: ctx.Err().Error()}
}

// propose commits recs and waits until they apply, whatever the caller's
// context does: the next request must see their effect.
func (c *Controller) propose(recs []image.Record) error {
	_, err := c.proposeImage(recs)
	return err
}

// proposeImage is propose that also returns the image just after the
// records applied.
func (c *Controller) proposeImage(recs []image.Record) (*image.Image, error) {
	img, err := c.node.Propose(c.ctx, recs...)
	return img, c.proposeError(err)
}

func (c *Controller) proposeError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raftnode.ErrNotController), errors.Is(err, raftnode.ErrProposalDropped),
		errors.Is(err, raftnode.ErrClosed), errors.Is(err, context.Canceled):
		return apiError(kerr.NotController, "leadership changed while the request was being committed")
	default:
		c.log.Error("metadata proposal failed", "err", err)
		return apiError(kerr.UnknownServerError, "%v", err)
	}
}

func notController() error {
	return apiError(kerr.NotController, "this node is not the active controller")
}

// CreateTopic is one topic to create.
type CreateTopic struct {
	Name string
	// NumPartitions and ReplicationFactor are the resolved counts (the
	// caller replaces a request's -1 by the broker defaults). With
	// Assignments both must be -1, as Kafka requires of the request.
	NumPartitions     int32
	ReplicationFactor int16
	// Assignments optionally maps each partition (0..n-1) to its replicas,
	// the first being the preferred leader.
	Assignments map[int32][]int32
	// Configs are the topic's config overrides, already validated.
	Configs map[string]string
}

// CreateTopicResult is the outcome for one topic.
type CreateTopicResult struct {
	Name              string
	ID                [16]byte
	Err               error // nil, or an *Error with a Kafka code
	NumPartitions     int32
	ReplicationFactor int16
}

// CreateTopics creates topics as Kafka's controller does: each topic
// succeeds or fails on its own, and the successful ones commit together
// (unless validateOnly). Results are in request order.
func (c *Controller) CreateTopics(ctx context.Context, topics []CreateTopic, validateOnly bool) []CreateTopicResult {
	in := make([]CreateTopic, len(topics))
	for i, t := range topics {
		in[i] = t
		in[i].Assignments = maps.Clone(t.Assignments)
		in[i].Configs = maps.Clone(t.Configs)
	}
	var out []CreateTopicResult
	var pc *pendingCreate
	err := c.doRequest(&request{ctx: ctx, done: make(chan struct{}), pipelined: true,
		fn: func() { out, pc = c.createTopics(in, validateOnly) }})
	if err == nil && pc != nil {
		// The topics answer success only once their records committed.
		out, err = pc.wait(ctx, c.node.Done())
	}
	if err != nil {
		out = make([]CreateTopicResult, len(topics))
		for i, t := range topics {
			out[i] = CreateTopicResult{Name: t.Name, Err: err}
		}
	}
	return out
}

// createTopics validates topics against the image and the creations in
// flight and submits the records of the valid ones as one entry. The
// results are final when the returned pendingCreate is nil; otherwise
// that holds them once the entry has committed or failed.
func (c *Controller) createTopics(topics []CreateTopic, validateOnly bool) ([]CreateTopicResult, *pendingCreate) {
	res := make([]CreateTopicResult, len(topics))
	for i, t := range topics {
		res[i].Name = t.Name
	}
	if !c.node.IsLeader() {
		for i := range res {
			res[i].Err = notController()
		}
		return res, nil
	}
	total := 0
	for _, t := range topics {
		if len(t.Assignments) > 0 {
			total += len(t.Assignments)
		} else if t.NumPartitions > 0 {
			total += int(t.NumPartitions)
		}
	}
	if total > maxPartitionsPerRequest {
		for i := range res {
			res[i].Err = apiError(kerr.PolicyViolation, "Excessively large number of partitions per request.")
		}
		return res, nil
	}
	counts := map[string]int{}
	for _, t := range topics {
		counts[t.Name]++
	}

	c.settle()
	img := c.node.Image()
	// The names and IDs of the creations in flight count as taken, as
	// those of the topics made earlier in this request do: planTopic sees
	// the state the log will have once everything submitted commits.
	pc := &pendingCreate{res: res, done: make(chan struct{})}
	var recs []image.Record
	var created []int
	for i, t := range topics {
		if counts[t.Name] > 1 {
			res[i].Err = apiError(kerr.InvalidRequest, "Duplicate topic name.")
			continue
		}
		topicRecs, err := c.planTopic(img, t, &c.inflight)
		if err != nil {
			res[i].Err = err
			continue
		}
		tr := topicRecs[0].(*image.TopicRecord)
		c.inflight.add(t.Name, tr.ID)
		pc.names = append(pc.names, t.Name)
		pc.ids = append(pc.ids, tr.ID)
		last := topicRecs[len(topicRecs)-1].(*image.PartitionRecord)
		res[i].ID = tr.ID
		res[i].NumPartitions = last.Partition + 1
		res[i].ReplicationFactor = int16(len(last.Replicas))
		recs = append(recs, topicRecs...)
		created = append(created, i)
	}
	if validateOnly || len(recs) == 0 {
		c.inflight.remove(pc)
		return res, nil
	}
	pc.created = created
	c.submitCreate(pc, recs)
	return res, pc
}

// planTopic validates one topic against img and the topics created earlier
// in the same request, and returns its records: the TopicRecord, its
// ConfigRecords, then one PartitionRecord per partition (Kafka's order).
func (c *Controller) planTopic(img *image.Image, t CreateTopic, pending *createOverlay) ([]image.Record, error) {
	if err := image.ValidateTopicName(t.Name); err != nil {
		return nil, apiError(kerr.InvalidTopicException, "%s", err.Error())
	}
	if t.Name == image.ClusterMetadataTopic {
		return nil, apiError(kerr.InvalidRequest, "Creation of internal topic %s is prohibited.", t.Name)
	}
	if _, ok := img.Topic(t.Name); ok || pending.names[t.Name] > 0 {
		return nil, apiError(kerr.TopicAlreadyExists, "Topic '%s' already exists.", t.Name)
	}
	if other, ok := img.CollidingTopic(t.Name); ok {
		return nil, apiError(kerr.InvalidTopicException, "Topic '%s' collides with existing topic: %s", t.Name, other)
	}
	if image.HasCollisionChars(t.Name) {
		if other, ok := pending.norm[image.UnifyCollisionChars(t.Name)]; ok {
			return nil, apiError(kerr.InvalidTopicException, "Topic '%s' collides with existing topic: %s", t.Name, other)
		}
	}
	for k := range t.Configs {
		if k == "" {
			return nil, apiError(kerr.InvalidConfig, "Empty config name.")
		}
	}

	var id [16]byte
	for {
		id = c.newID()
		if _, taken := img.TopicByID(id); !taken && !pending.ids[id] {
			break
		}
	}
	var parts [][]int32
	var isrs [][]int32
	if len(t.Assignments) > 0 {
		if t.ReplicationFactor != -1 {
			return nil, apiError(kerr.InvalidRequest, "A manual partition assignment was specified, but replication factor was not set to -1.")
		}
		if t.NumPartitions != -1 {
			return nil, apiError(kerr.InvalidRequest, "A manual partition assignment was specified, but numPartitions was not set to -1.")
		}
		ids := slices.Sorted(maps.Keys(t.Assignments))
		rf := -1
		for _, p := range ids {
			replicas := t.Assignments[p]
			if err := validateManualAssignment(img, replicas, rf); err != nil {
				return nil, err
			}
			rf = len(replicas)
			isr := activeReplicas(img, replicas)
			if len(isr) == 0 {
				return nil, apiError(kerr.InvalidReplicaAssignment, "All brokers specified in the manual partition assignment for partition %d are fenced or in controlled shutdown.", p)
			}
			parts = append(parts, replicas)
			isrs = append(isrs, isr)
		}
		for i, p := range ids {
			if p != int32(i) {
				return nil, apiError(kerr.InvalidReplicaAssignment, "partitions should be a consecutive 0-based integer sequence")
			}
		}
	} else {
		if t.ReplicationFactor < 1 {
			return nil, apiError(kerr.InvalidReplicationFactor, "Replication factor must be larger than 0, or -1 to use the default value.")
		}
		if t.NumPartitions < 1 {
			return nil, apiError(kerr.InvalidPartitions, "Number of partitions was set to an invalid non-positive value.")
		}
		var err error
		if parts, err = placeReplicas(img, id, 0, int(t.NumPartitions), int(t.ReplicationFactor)); err != nil {
			return nil, err
		}
		isrs = parts
	}

	recs := []image.Record{&image.TopicRecord{Name: t.Name, ID: id}}
	for _, k := range slices.Sorted(maps.Keys(t.Configs)) {
		v := t.Configs[k]
		recs = append(recs, &image.ConfigRecord{ResourceType: image.ResourceTopic, ResourceName: t.Name, Name: k, Value: &v})
	}
	for p, replicas := range parts {
		recs = append(recs, newPartitionRecord(id, int32(p), replicas, isrs[p]))
	}
	return recs, nil
}

func newPartitionRecord(topicID [16]byte, p int32, replicas, isr []int32) *image.PartitionRecord {
	return &image.PartitionRecord{
		TopicID:   topicID,
		Partition: p,
		Replicas:  slices.Clone(replicas),
		ISR:       slices.Clone(isr),
		Leader:    isr[0],
	}
}

// activeReplicas returns the replicas that are registered and unfenced, in
// order: the initial ISR.
func activeReplicas(img *image.Image, replicas []int32) []int32 {
	var isr []int32
	for _, r := range replicas {
		if b, ok := img.Broker(r); ok && !b.Fenced {
			isr = append(isr, r)
		}
	}
	return isr
}

// validateManualAssignment checks one partition's requested replicas as
// Kafka's validateManualPartitionAssignment does; rf is the replica count
// of the partitions before it, -1 for the first.
func validateManualAssignment(img *image.Image, replicas []int32, rf int) error {
	if len(replicas) == 0 {
		return apiError(kerr.InvalidReplicaAssignment, "The manual partition assignment includes an empty replica list.")
	}
	sorted := slices.Sorted(slices.Values(replicas))
	for i, b := range sorted {
		if _, ok := img.Broker(b); !ok {
			return apiError(kerr.InvalidReplicaAssignment, "The manual partition assignment includes broker %d, but no such broker is registered.", b)
		}
		if i > 0 && sorted[i-1] == b {
			return apiError(kerr.InvalidReplicaAssignment, "The manual partition assignment includes the broker %d more than once.", b)
		}
	}
	if rf >= 0 && len(replicas) != rf {
		return apiError(kerr.InvalidReplicaAssignment, "The manual partition assignment includes a partition with %d replica(s), but this is not consistent with previous partitions, which have %d replica(s).", len(replicas), rf)
	}
	return nil
}

// placeReplicas assigns partitions [first, first+count) of a topic to the
// unfenced brokers in rotation: partition p's replicas are rf consecutive
// brokers (in ID order) starting at (start+p), where start comes from the
// topic ID so that topics spread their preferred leaders across brokers and
// partitions added later continue the same rotation.
func placeReplicas(img *image.Image, topicID [16]byte, first, count, rf int) ([][]int32, error) {
	brokers := img.UnfencedBrokerIDs()
	if len(brokers) == 0 && img.NumBrokers() > 0 {
		return nil, apiError(kerr.InvalidReplicationFactor, "Unable to replicate the partition %d time(s): All brokers are currently fenced.", rf)
	}
	// Kafka counts fenced brokers here and may place followers on them;
	// Gregor places replicas on unfenced brokers only.
	if rf > len(brokers) {
		return nil, apiError(kerr.InvalidReplicationFactor, "Unable to replicate the partition %d time(s): The target replication factor of %d cannot be reached because only %d broker(s) are registered.", rf, rf, len(brokers))
	}
	n := len(brokers)
	start := int(binary.BigEndian.Uint32(topicID[12:]) % uint32(n))
	parts := make([][]int32, count)
	for i := range parts {
		p := first + i
		replicas := make([]int32, rf)
		for j := range replicas {
			replicas[j] = brokers[(start+p+j)%n]
		}
		parts[i] = replicas
	}
	return parts, nil
}

// DeleteTopicResult is the outcome for one topic to delete.
type DeleteTopicResult struct {
	Name string
	ID   [16]byte
	Err  error
}

// DeleteTopics deletes topics named by name or by ID. The results hold one
// entry per name, in order, then one per ID, with both name and ID filled
// in where the topic was found.
func (c *Controller) DeleteTopics(ctx context.Context, names []string, ids [][16]byte) []DeleteTopicResult {
	names, ids = slices.Clone(names), slices.Clone(ids)
	var out []DeleteTopicResult
	if err := c.do(ctx, func() { out = c.deleteTopics(names, ids) }); err != nil {
		out = make([]DeleteTopicResult, 0, len(names)+len(ids))
		for _, n := range names {
			out = append(out, DeleteTopicResult{Name: n, Err: err})
		}
		for _, id := range ids {
			out = append(out, DeleteTopicResult{ID: id, Err: err})
		}
	}
	return out
}

func (c *Controller) deleteTopics(names []string, ids [][16]byte) []DeleteTopicResult {
	res := make([]DeleteTopicResult, len(names)+len(ids))
	byName, byID := res[:len(names)], res[len(names):]
	for i, n := range names {
		byName[i].Name = n
	}
	for i, id := range ids {
		byID[i].ID = id
	}
	if !c.node.IsLeader() {
		for i := range res {
			res[i].Err = notController()
		}
		return res
	}
	img := c.node.Image()
	idCount := map[[16]byte]int{}
	for _, id := range ids {
		idCount[id]++
	}
	nameCount := map[string]int{}
	for _, n := range names {
		nameCount[n]++
	}
	var recs []image.Record
	var deleting []int
	for i, id := range ids {
		switch t, ok := img.TopicByID(id); {
		case id == [16]byte{}:
			byID[i].Err = apiError(kerr.InvalidRequest, "Neither topic name nor id were specified.")
		case idCount[id] > 1:
			byID[i].Err = apiError(kerr.InvalidRequest, "Duplicate topic id.")
		case !ok:
			byID[i].Err = apiError(kerr.UnknownTopicID, "This server does not host this topic ID.")
		default:
			byID[i].Name = t.Name
			recs = append(recs, &image.RemoveTopicRecord{TopicID: id})
			deleting = append(deleting, len(names)+i)
		}
	}
	for i, n := range names {
		switch t, ok := img.Topic(n); {
		case nameCount[n] > 1:
			byName[i].Err = apiError(kerr.InvalidRequest, "Duplicate topic name.")
		case !ok:
			byName[i].Err = apiError(kerr.UnknownTopicOrPartition, "This server does not host this topic-partition.")
		case idCount[t.ID] > 0:
			byName[i].ID = t.ID
			byName[i].Err = apiError(kerr.InvalidRequest, "The provided topic name maps to an ID that was already supplied.")
		default:
			byName[i].ID = t.ID
			recs = append(recs, &image.RemoveTopicRecord{TopicID: t.ID})
			deleting = append(deleting, i)
		}
	}
	if len(recs) == 0 {
		return res
	}
	if err := c.propose(recs); err != nil {
		for _, i := range deleting {
			res[i].Err = err
		}
		return res
	}
	c.log.Debug("deleted topics", "count", len(recs))
	return res
}

// CreatePartitions asks for one topic to grow to Count partitions.
type CreatePartitions struct {
	Topic string
	Count int32
	// Assignments optionally gives the replicas of each new partition.
	Assignments [][]int32
}

// CreatePartitionsResult is the outcome for one topic.
type CreatePartitionsResult struct {
	Topic string
	Err   error
}

// CreatePartitions adds partitions to existing topics. New partitions keep
// the replication factor of partition 0. Results are in request order.
func (c *Controller) CreatePartitions(ctx context.Context, reqs []CreatePartitions, validateOnly bool) []CreatePartitionsResult {
	in := slices.Clone(reqs)
	var out []CreatePartitionsResult
	if err := c.do(ctx, func() { out = c.createPartitions(in, validateOnly) }); err != nil {
		out = make([]CreatePartitionsResult, len(reqs))
		for i, r := range reqs {
			out[i] = CreatePartitionsResult{Topic: r.Topic, Err: err}
		}
	}
	return out
}

func (c *Controller) createPartitions(reqs []CreatePartitions, validateOnly bool) []CreatePartitionsResult {
	res := make([]CreatePartitionsResult, len(reqs))
	for i, r := range reqs {
		res[i].Topic = r.Topic
	}
	if !c.node.IsLeader() {
		for i := range res {
			res[i].Err = notController()
		}
		return res
	}
	img := c.node.Image()
	counts := map[string]int{}
	total := 0
	for _, r := range reqs {
		counts[r.Topic]++
		if t, ok := img.Topic(r.Topic); ok && int(r.Count) > len(t.Partitions) {
			total += int(r.Count) - len(t.Partitions)
		}
	}
	if total > maxPartitionsPerRequest {
		for i := range res {
			res[i].Err = apiError(kerr.PolicyViolation, "Excessively large number of partitions per request.")
		}
		return res
	}
	var recs []image.Record
	var growing []int
	for i, r := range reqs {
		if counts[r.Topic] > 1 {
			res[i].Err = apiError(kerr.InvalidRequest, "Duplicate topic name.")
			continue
		}
		rs, err := planPartitions(img, r)
		if err != nil {
			res[i].Err = err
			continue
		}
		recs = append(recs, rs...)
		growing = append(growing, i)
	}
	if validateOnly || len(recs) == 0 {
		return res
	}
	if err := c.propose(recs); err != nil {
		for _, i := range growing {
			res[i].Err = err
		}
	}
	return res
}

func planPartitions(img *image.Image, r CreatePartitions) ([]image.Record, error) {
	t, ok := img.Topic(r.Topic)
	if !ok {
		return nil, apiError(kerr.UnknownTopicOrPartition, "This server does not host this topic-partition.")
	}
	cur := len(t.Partitions)
	switch {
	case int(r.Count) == cur:
		return nil, apiError(kerr.InvalidPartitions, "Topic already has %d partition(s).", cur)
	case int(r.Count) < cur:
		return nil, apiError(kerr.InvalidPartitions, "The topic %s currently has %d partition(s); %d would not be an increase.", r.Topic, cur, r.Count)
	}
	add := int(r.Count) - cur
	if r.Assignments != nil && len(r.Assignments) != add {
		return nil, apiError(kerr.InvalidReplicaAssignment, "Attempted to add %d additional partition(s), but only %d assignment(s) were specified.", add, len(r.Assignments))
	}
	if cur == 0 {
		return nil, apiError(kerr.UnknownServerError, "Invalid state: topic %s appears to have no partitions.", r.Topic)
	}
	rf := len(t.Partitions[0].Replicas)
	var parts, isrs [][]int32
	if r.Assignments != nil {
		for i, replicas := range r.Assignments {
			if err := validateManualAssignment(img, replicas, rf); err != nil {
				return nil, err
			}
			isr := activeReplicas(img, replicas)
			if len(isr) == 0 {
				return nil, apiError(kerr.InvalidReplicaAssignment, "All brokers specified in the manual partition assignment for partition %d are fenced or in controlled shutdown.", cur+i)
			}
			parts = append(parts, replicas)
			isrs = append(isrs, isr)
		}
	} else {
		var err error
		if parts, err = placeReplicas(img, t.ID, cur, add, rf); err != nil {
			return nil, err
		}
		isrs = parts
	}
	recs := make([]image.Record, 0, add)
	for i := range parts {
		recs = append(recs, newPartitionRecord(t.ID, int32(cur+i), parts[i], isrs[i]))
	}
	return recs, nil
}

// AlterConfigs sets (non-nil value) or deletes (nil) configs of one topic,
// broker or group (resourceType ResourceTopic, ResourceBroker or
// ResourceGroup; broker name "" is the cluster default). The caller has
// validated names and values.
func (c *Controller) AlterConfigs(ctx context.Context, resourceType int8, name string, set map[string]*string, validateOnly bool) error {
	in := make(map[string]*string, len(set))
	for k, v := range set {
		in[k] = cloneString(v)
	}
	var out error
	if err := c.do(ctx, func() { out = c.alterConfigs(resourceType, name, in, validateOnly) }); err != nil {
		return err
	}
	return out
}

func (c *Controller) alterConfigs(resourceType int8, name string, set map[string]*string, validateOnly bool) error {
	if !c.node.IsLeader() {
		return notController()
	}
	img := c.node.Image()
	var current map[string]string
	switch resourceType {
	case image.ResourceTopic:
		t, ok := img.Topic(name)
		if !ok {
			return apiError(kerr.UnknownTopicOrPartition, "The topic '%s' does not exist.", name)
		}
		current = t.Configs
	case image.ResourceBroker:
		if name != "" {
			if id, err := strconv.ParseInt(name, 10, 32); err != nil || id < 0 {
				return apiError(kerr.InvalidRequest, "Illegal broker ID %q", name)
			}
		}
		current = img.BrokerConfigs(name)
	case image.ResourceGroup:
		if name == "" {
			return apiError(kerr.InvalidRequest, "Group name must not be empty")
		}
		current = img.GroupConfigs(name)
	default:
		return apiError(kerr.InvalidRequest, "Unsupported resource type %d", resourceType)
	}
	var recs []image.Record
	for _, k := range slices.Sorted(maps.Keys(set)) {
		if k == "" {
			return apiError(kerr.InvalidConfig, "Empty config name.")
		}
		v := set[k]
		old, had := current[k]
		if v == nil && !had || v != nil && had && old == *v {
			continue // no change, no record
		}
		recs = append(recs, &image.ConfigRecord{ResourceType: resourceType, ResourceName: name, Name: k, Value: v})
	}
	if validateOnly || len(recs) == 0 {
		return nil
	}
	return c.propose(recs)
}

// RegisterBroker registers a broker (Kafka's BrokerRegistration) and
// returns its broker epoch. A retry with the same incarnation ID returns
// the existing epoch; a new incarnation replaces the registration with a
// higher epoch. With broker liveness on (BrokerSessionTimeout), the broker
// is registered fenced, as in Kafka, and its first heartbeat after it has
// caught up with the log unfences it; a new incarnation is also taken out
// of every ISR and loses its leaderships. With liveness off it is
// registered unfenced, since nothing would unfence it later. The record's
// Epoch and Fenced fields are chosen by the controller.
func (c *Controller) RegisterBroker(ctx context.Context, reg image.RegisterBrokerRecord) (int64, error) {
	reg.Listeners = slices.Clone(reg.Listeners)
	reg.Rack = cloneString(reg.Rack)
	var epoch int64
	var out error
	if err := c.do(ctx, func() { epoch, out = c.registerBroker(reg) }); err != nil {
		return 0, err
	}
	return epoch, out
}

func (c *Controller) registerBroker(reg image.RegisterBrokerRecord) (int64, error) {
	if !c.node.IsLeader() {
		return 0, notController()
	}
	c.activate()
	if reg.BrokerID < 0 {
		return 0, apiError(kerr.InvalidRequest, "Invalid broker ID %d", reg.BrokerID)
	}
	img := c.node.Image()
	// Kafka uses the offset of the registration record as the epoch; the
	// next entry's index is above every applied one, so offset+1 is unique
	// and increasing in the same way.
	epoch := int64(img.Offset()) + 1
	var recs []image.Record
	if old, ok := img.Broker(reg.BrokerID); ok {
		if old.IncarnationID == reg.IncarnationID {
			return old.Epoch, nil
		}
		epoch = max(epoch, old.Epoch+1)
		if c.livenessOn() {
			// A new incarnation means the broker restarted: as Kafka does,
			// take it out of every ISR and move its leaderships away until
			// it has caught up and is unfenced again.
			recs = c.removeFromISRs(img, reg.BrokerID)
		}
	}
	reg.Epoch = epoch
	// With heartbeats, a broker starts fenced and its first heartbeat
	// after catching up with the log unfences it, as in Kafka. Without
	// them nothing would ever unfence it.
	reg.Fenced = c.livenessOn()
	delete(c.shuttingDown, reg.BrokerID)
	if err := c.propose(append(recs, &reg)); err != nil {
		return 0, err
	}
	c.lastContact[reg.BrokerID] = c.cfg.Now()
	c.log.Debug("registered broker", "broker", reg.BrokerID, "epoch", epoch)
	return epoch, nil
}

// AllocateProducerIDs hands the broker the next block of producer IDs:
// [first, first+count).
func (c *Controller) AllocateProducerIDs(ctx context.Context, brokerID int32) (first, count int64, err error) {
	// The closure writes its own variables: after a timeout it may still
	// run while this returns.
	var f, n int64
	var out error
	if err := c.do(ctx, func() { f, n, out = c.allocateProducerIDs(brokerID) }); err != nil {
		return 0, 0, err
	}
	return f, n, out
}

func (c *Controller) allocateProducerIDs(brokerID int32) (int64, int64, error) {
	if !c.node.IsLeader() {
		return 0, 0, notController()
	}
	img := c.node.Image()
	b, ok := img.Broker(brokerID)
	if !ok {
		return 0, 0, apiError(kerr.StaleBrokerEpoch, "No broker registration found for broker %d", brokerID)
	}
	first := img.NextProducerID()
	if first > math.MaxInt64-ProducerIDBlockSize {
		return 0, 0, apiError(kerr.UnknownServerError, "Exhausted all producerIds as the next block's end producerId has exceeded the int64 type limit")
	}
	rec := &image.ProducerIDsRecord{BrokerID: brokerID, BrokerEpoch: b.Epoch, NextProducerID: first + ProducerIDBlockSize}
	if err := c.propose([]image.Record{rec}); err != nil {
		return 0, 0, err
	}
	return first, ProducerIDBlockSize, nil
}

func cloneString(s *string) *string {
	if s == nil {
		return nil
	}
	c := *s
	return &c
}
