package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/gregorbroker/gregor/config"
)

// aclJAAS is the PLAIN users of the authorization tests: admin is the
// super user, alice has ACLs, bob has only a DENY.
const aclJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required
    user_admin="admin-secret"
    user_alice="alice-secret"
    user_bob="bob-secret";`

// aclServer starts a broker with the StandardAuthorizer, a PLAINTEXT
// listener (User:ANONYMOUS) and a SASL_PLAINTEXT one with aclJAAS's
// users, and returns it with a client per principal.
//
// With GREGOR_ACL_REFERENCE set to "plain=host:port,sasl=host:port,
// allow=BOOL" the clients go to that broker instead (a Kafka node with
// the same listeners, users and settings, such as the reference Kafka),
// so that the matrix shows it asserts Kafka's codes; the server returned
// is then nil, and a mode other than the reference's is skipped.
func aclServer(t *testing.T, allowEveryone bool) (*secureServer, map[string]*kgo.Client) {
	t.Helper()
	if ref := os.Getenv("GREGOR_ACL_REFERENCE"); ref != "" {
		addrs := map[string]string{}
		for _, kv := range strings.Split(ref, ",") {
			k, v, _ := strings.Cut(kv, "=")
			addrs[k] = v
		}
		if addrs["allow"] != fmt.Sprint(allowEveryone) {
			t.Skipf("the reference at %s has allow.everyone.if.no.acl.found=%s", ref, addrs["allow"])
		}
		clients := map[string]*kgo.Client{"anonymous": newClient(t, addrs["plain"])}
		for _, u := range []string{"admin", "alice", "bob"} {
			clients[u] = newClient(t, addrs["sasl"], kgo.SASL(plain.Auth{User: u, Pass: u + "-secret"}.AsMechanism()))
		}
		return nil, clients
	}
	s := startSecureServer(t, map[string]string{
		"listeners":                      "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
		"sasl.enabled.mechanisms":        "PLAIN",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": aclJAAS,
		"authorizer.class.name":                               config.StandardAuthorizer,
		"super.users":                                         "User:admin",
		"allow.everyone.if.no.acl.found":                      fmt.Sprint(allowEveryone),
		"group.initial.rebalance.delay.ms":                    "0",
	}, Options{})
	sasl := s.addr(t, "SASL_PLAINTEXT")
	clients := map[string]*kgo.Client{"anonymous": newClient(t, s.addr(t, "PLAINTEXT"))}
	for _, u := range []string{"admin", "alice", "bob"} {
		clients[u] = newClient(t, sasl, kgo.SASL(plain.Auth{User: u, Pass: u + "-secret"}.AsMechanism()))
	}
	return s, clients
}

func ctx10(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// send sends req straight to broker 1 through cl (no routing, no
// retries), so that the answer is the broker's own.
func send[R kmsg.Response](t *testing.T, cl *kgo.Client, req kmsg.Request) R {
	t.Helper()
	resp, err := cl.Broker(1).Request(ctx10(t), req)
	if err != nil {
		t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp.(R)
}

func aclCreation(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, principal string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) kmsg.CreateACLsRequestCreation {
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = rt, name, pt
	c.Principal, c.Host, c.Operation, c.PermissionType = principal, "*", op, perm
	return c
}

// setUpACLs creates the topics and ACLs of the matrix as the super user.
func setUpACLs(t *testing.T, admin *kgo.Client) {
	t.Helper()
	ct := kmsg.NewPtrCreateTopicsRequest()
	for _, name := range []string{"t", "free"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
		ct.Topics = append(ct.Topics, rt)
	}
	for _, r := range send[*kmsg.CreateTopicsResponse](t, admin, ct).Topics {
		// A reference broker may have them from an earlier run.
		if r.ErrorCode != 0 && r.ErrorCode != kerr.TopicAlreadyExists.Code {
			t.Fatalf("create topic %s: %d", r.Topic, r.ErrorCode)
		}
	}
	// The logs are made after CreateTopics answers, as Kafka's are.
	for _, name := range []string{"t", "free"} {
		waitTopicReady(t, kadm.NewClient(admin), name, 1)
	}
	for _, mt := range send[*kmsg.MetadataResponse](t, admin, kmsg.NewPtrMetadataRequest()).Topics {
		topicIDs[*mt.Topic] = mt.TopicID
	}
	const (
		topic   = kmsg.ACLResourceTypeTopic
		group   = kmsg.ACLResourceTypeGroup
		txn     = kmsg.ACLResourceTypeTransactionalId
		lit     = kmsg.ACLResourcePatternTypeLiteral
		pre     = kmsg.ACLResourcePatternTypePrefixed
		allow   = kmsg.ACLPermissionTypeAllow
		deny    = kmsg.ACLPermissionTypeDeny
		alice   = "User:alice"
		anybody = "User:*"
	)
	req := kmsg.NewPtrCreateACLsRequest()
	req.Creations = []kmsg.CreateACLsRequestCreation{
		aclCreation(topic, "t", lit, alice, kmsg.ACLOperationRead, allow),
		aclCreation(topic, "t", lit, alice, kmsg.ACLOperationWrite, allow),
		aclCreation(topic, "t", lit, anybody, kmsg.ACLOperationDescribe, allow),
		aclCreation(topic, "t", lit, "User:bob", kmsg.ACLOperationAll, deny),
		aclCreation(group, "g", lit, alice, kmsg.ACLOperationRead, allow),
		aclCreation(txn, "tx", lit, alice, kmsg.ACLOperationWrite, allow),
		aclCreation(topic, "alice-", pre, alice, kmsg.ACLOperationCreate, allow),
	}
	for i, r := range send[*kmsg.CreateACLsResponse](t, admin, req).Results {
		if r.ErrorCode != 0 {
			t.Fatalf("create ACL %d: %d %v", i, r.ErrorCode, r.ErrorMessage)
		}
	}
	// A Kafka broker applies the ACLs when the controller's records
	// reach it, after CreateAcls answers: wait until it describes them.
	deadline := time.Now().Add(10 * time.Second)
	for {
		d := kmsg.NewPtrDescribeACLsRequest()
		d.ResourceType, d.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
		d.Operation, d.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		n := 0
		for _, r := range send[*kmsg.DescribeACLsResponse](t, admin, d).Resources {
			n += len(r.ACLs)
		}
		if n == len(req.Creations) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d ACLs described, want %d", n, len(req.Creations))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// settled runs code until it answers something other than a coordinator
// still being created or loaded (a Kafka broker creates
// __consumer_offsets and __transaction_state in the background), for up
// to 20 s.
func settled(code func(*testing.T, *kgo.Client, string) int16) func(*testing.T, *kgo.Client, string) int16 {
	return func(t *testing.T, cl *kgo.Client, who string) int16 {
		deadline := time.Now().Add(20 * time.Second)
		for {
			c := code(t, cl, who)
			switch c {
			case kerr.CoordinatorNotAvailable.Code, kerr.NotCoordinator.Code, kerr.CoordinatorLoadInProgress.Code:
				if time.Now().Before(deadline) {
					time.Sleep(100 * time.Millisecond)
					continue
				}
			}
			return c
		}
	}
}

// matrixCase is one request of the matrix: what it sends, as a function
// of the principal, and the error code of the answer that is checked.
type matrixCase struct {
	name string
	code func(t *testing.T, cl *kgo.Client, who string) int16
}

func metadataCode(topic string) func(*testing.T, *kgo.Client, string) int16 {
	return func(t *testing.T, cl *kgo.Client, _ string) int16 {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		return send[*kmsg.MetadataResponse](t, cl, req).Topics[0].ErrorCode
	}
}

// topicIDs are the ids of the matrix's topics, for the requests that
// kgo sends at versions naming topics by id.
var topicIDs = map[string][16]byte{}

func produceCode(topic string) func(*testing.T, *kgo.Client, string) int16 {
	return func(t *testing.T, cl *kgo.Client, _ string) int16 {
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = 1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.TopicID = topic, topicIDs[topic]
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = testBatch(t, "v")
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return send[*kmsg.ProduceResponse](t, cl, req).Topics[0].Partitions[0].ErrorCode
	}
}

func fetchCode(topic string) func(*testing.T, *kgo.Client, string) int16 {
	return func(t *testing.T, cl *kgo.Client, _ string) int16 {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, 1<<20, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, topicIDs[topic]
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes, rp.LogStartOffset, rp.CurrentLeaderEpoch = 1<<20, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return send[*kmsg.FetchResponse](t, cl, req).Topics[0].Partitions[0].ErrorCode
	}
}

func listOffsetsCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp, rp.CurrentLeaderEpoch = -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return send[*kmsg.ListOffsetsResponse](t, cl, req).Topics[0].Partitions[0].ErrorCode
}

func findCoordinatorCode(typ int8, key string) func(*testing.T, *kgo.Client, string) int16 {
	return func(t *testing.T, cl *kgo.Client, _ string) int16 {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType, req.CoordinatorKeys = typ, []string{key}
		return send[*kmsg.FindCoordinatorResponse](t, cl, req).Coordinators[0].ErrorCode
	}
}

func joinGroupCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis, req.ProtocolType = "g", 10000, 10000, "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name = "range"
	req.Protocols = append(req.Protocols, p)
	return send[*kmsg.JoinGroupResponse](t, cl, req).ErrorCode
}

func offsetCommitCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = "g", -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic, rt.TopicID = "t", topicIDs["t"]
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Offset = 0
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return send[*kmsg.OffsetCommitResponse](t, cl, req).Topics[0].Partitions[0].ErrorCode
}

func offsetFetchCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	req := kmsg.NewPtrOffsetFetchRequest()
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = "g"
	gt := kmsg.NewOffsetFetchRequestGroupTopic()
	gt.Topic, gt.TopicID, gt.Partitions = "t", topicIDs["t"], []int32{0}
	g.Topics = append(g.Topics, gt)
	req.Groups = append(req.Groups, g)
	rg := send[*kmsg.OffsetFetchResponse](t, cl, req).Groups[0]
	if rg.ErrorCode != 0 {
		return rg.ErrorCode
	}
	return rg.Topics[0].Partitions[0].ErrorCode
}

func describeGroupsCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{"g"}
	return send[*kmsg.DescribeGroupsResponse](t, cl, req).Groups[0].ErrorCode
}

func initProducerIDCode(txnID *string) func(*testing.T, *kgo.Client, string) int16 {
	return func(t *testing.T, cl *kgo.Client, _ string) int16 {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = txnID, 60000
		req.ProducerID, req.ProducerEpoch = -1, -1
		return send[*kmsg.InitProducerIDResponse](t, cl, req).ErrorCode
	}
}

// createTopicCode creates "alice-<who>-<n>", which alice's prefixed
// CREATE allows.
func createTopicCode(t *testing.T, cl *kgo.Client, who string) int16 {
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = fmt.Sprintf("alice-%s-%d", who, time.Now().UnixNano()), 1, 1
	req.Topics = append(req.Topics, rt)
	return send[*kmsg.CreateTopicsResponse](t, cl, req).Topics[0].ErrorCode
}

func describeConfigsCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
	req.Resources = append(req.Resources, rr)
	return send[*kmsg.DescribeConfigsResponse](t, cl, req).Resources[0].ErrorCode
}

func describeACLsCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	return send[*kmsg.DescribeACLsResponse](t, cl, req).ErrorCode
}

func describeClientQuotasCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	return send[*kmsg.DescribeClientQuotasResponse](t, cl, kmsg.NewPtrDescribeClientQuotasRequest()).ErrorCode
}

// alterClientQuotasCode validates (only) a producer quota for user u.
func alterClientQuotasCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	req := kmsg.NewPtrAlterClientQuotasRequest()
	req.ValidateOnly = true
	e := kmsg.NewAlterClientQuotasRequestEntry()
	en := kmsg.NewAlterClientQuotasRequestEntryEntity()
	en.Type, en.Name = "user", kmsg.StringPtr("u")
	op := kmsg.NewAlterClientQuotasRequestEntryOp()
	op.Key, op.Value = "producer_byte_rate", 1024
	e.Entity, e.Ops = append(e.Entity, en), append(e.Ops, op)
	req.Entries = append(req.Entries, e)
	return send[*kmsg.AlterClientQuotasResponse](t, cl, req).Entries[0].ErrorCode
}

func describeScramCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	return send[*kmsg.DescribeUserSCRAMCredentialsResponse](t, cl, kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()).ErrorCode
}

// alterScramCode deletes a credential no user has.
func alterScramCode(t *testing.T, cl *kgo.Client, _ string) int16 {
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	d.Name, d.Mechanism = "nobody", 1
	req.Deletions = append(req.Deletions, d)
	return send[*kmsg.AlterUserSCRAMCredentialsResponse](t, cl, req).Results[0].ErrorCode
}

// The error codes the matrix expects.
var (
	ok      = int16(0)
	topicAF = kerr.TopicAuthorizationFailed.Code
	groupAF = kerr.GroupAuthorizationFailed.Code
	clustAF = kerr.ClusterAuthorizationFailed.Code
	txnAF   = kerr.TransactionalIDAuthorizationFailed.Code
	memReq  = kerr.MemberIDRequired.Code
	unkMem  = kerr.UnknownMemberID.Code
	noGroup = kerr.GroupIDNotFound.Code
	badPID  = kerr.InvalidProducerIDMapping.Code
	noRes   = kerr.ResourceNotFound.Code
)

// TestAuthorizationMatrix sends each request of the common client path
// over real sockets as four principals (the super user admin, alice
// with ACLs, bob with a DENY, and User:ANONYMOUS on PLAINTEXT), with
// allow.everyone.if.no.acl.found off and on, and checks Kafka's error
// code for each.
func TestAuthorizationMatrix(t *testing.T) {
	tx := "tx"
	other := "other-tx"
	cases := []matrixCase{
		{"Metadata t", metadataCode("t")},
		{"Metadata free", metadataCode("free")},
		{"Produce t", produceCode("t")},
		{"Produce free", produceCode("free")},
		{"Fetch t", fetchCode("t")},
		{"Fetch free", fetchCode("free")},
		{"ListOffsets t", listOffsetsCode},
		{"FindCoordinator group g", settled(findCoordinatorCode(0, "g"))},
		{"FindCoordinator txn tx", settled(findCoordinatorCode(1, "tx"))},
		{"JoinGroup g", settled(joinGroupCode)},
		{"OffsetCommit g t", settled(offsetCommitCode)},
		{"OffsetFetch g t", settled(offsetFetchCode)},
		{"DescribeGroups g", settled(describeGroupsCode)},
		{"InitProducerId tx", settled(initProducerIDCode(&tx))},
		{"InitProducerId other-tx", settled(initProducerIDCode(&other))},
		{"InitProducerId idempotent", settled(initProducerIDCode(nil))},
		{"CreateTopics alice-*", createTopicCode},
		{"DescribeConfigs topic t", describeConfigsCode},
		{"DescribeAcls", describeACLsCode},
		{"Heartbeat g", settled(heartbeatCode)},
		{"DeleteGroups free-group", settled(deleteGroupsCode)},
		{"DescribeConfigs broker", describeBrokerConfigsCode},
		{"IncrementalAlterConfigs topic t", alterTopicConfigsCode},
		{"CreatePartitions t", createPartitionsCode},
		{"DeleteRecords t", deleteRecordsCode},
		{"OffsetForLeaderEpoch t", offsetForLeaderEpochCode},
		{"DescribeProducers t", describeProducersCode},
		{"DescribeTransactions tx", settled(describeTransactionsCode)},
		{"EndTxn tx", settled(endTxnCode)},
		{"AddOffsetsToTxn tx g", settled(addOffsetsToTxnCode)},
		{"ElectLeaders t", electLeadersCode},
		{"DescribeLogDirs", describeLogDirsCode},
		{"ListPartitionReassignments", listReassignmentsCode},
		{"DescribeTopicPartitions t", describeTopicPartitionsCode},
		{"CreateAcls", createACLsCode},
		{"ConsumerGroupDescribe g", settled(consumerGroupDescribeCode)},
		// KIP-848 with Kafka 4.2's topic checks, in this order: cg's
		// members subscribe to t, then cg is described.
		{"ConsumerGroupHeartbeat cg t", settled(consumerHeartbeatCode("t"))},
		{"ConsumerGroupHeartbeat cg free", settled(consumerHeartbeatCode("free"))},
		{"ConsumerGroupDescribe cg", settled(consumerGroupDescribeCGCode)},
		{"DescribeClientQuotas", describeClientQuotasCode},
		{"AlterClientQuotas validate", alterClientQuotasCode},
		{"DescribeUserScramCredentials", describeScramCode},
		{"AlterUserScramCredentials delete", alterScramCode},
		// Share groups (KIP-932), in this order: sq exists once fetched,
		// and its offsets are deleted after they are altered.
		{"ShareGroupHeartbeat sg t", settled(shareHeartbeatCode("t"))},
		{"ShareGroupHeartbeat sg free", settled(shareHeartbeatCode("free"))},
		{"ShareGroupDescribe sg", settled(shareGroupDescribeCode)},
		{"ShareFetch sq", settled(shareFetchCode)},
		{"ShareAcknowledge sq", settled(shareAcknowledgeCode)},
		{"AlterShareGroupOffsets sq t", settled(alterShareOffsetsCode)},
		{"DescribeShareGroupOffsets sq t", settled(describeShareOffsetsCode)},
		{"DeleteShareGroupOffsets sq t", settled(deleteShareOffsetsCode)},
		// Streams groups (KIP-1071): READ on the group, then DESCRIBE on
		// the topology's topics; DESCRIBE on the group to describe it.
		{"StreamsGroupHeartbeat stg-t t", settled(streamsHeartbeatCode("stg-t", "t"))},
		{"StreamsGroupHeartbeat stg-free free", settled(streamsHeartbeatCode("stg-free", "free"))},
		{"StreamsGroupDescribe stg-t", settled(streamsGroupDescribeCode)},
	}
	principals := []string{"admin", "alice", "bob", "anonymous"}
	// want[allowEveryone][case] is the code per principal, in the order
	// of principals.
	want := map[bool]map[string][4]int16{
		false: {
			"Metadata t":                          {ok, ok, topicAF, ok},
			"Metadata free":                       {ok, topicAF, topicAF, topicAF},
			"Produce t":                           {ok, ok, topicAF, topicAF},
			"Produce free":                        {ok, topicAF, topicAF, topicAF},
			"Fetch t":                             {ok, ok, topicAF, topicAF},
			"Fetch free":                          {ok, topicAF, topicAF, topicAF},
			"ListOffsets t":                       {ok, ok, topicAF, ok},
			"FindCoordinator group g":             {ok, ok, groupAF, groupAF},
			"FindCoordinator txn tx":              {ok, ok, txnAF, txnAF},
			"JoinGroup g":                         {memReq, memReq, groupAF, groupAF},
			"OffsetCommit g t":                    {ok, ok, groupAF, groupAF},
			"OffsetFetch g t":                     {ok, ok, groupAF, groupAF},
			"DescribeGroups g":                    {ok, ok, groupAF, groupAF},
			"InitProducerId tx":                   {ok, ok, txnAF, txnAF},
			"InitProducerId other-tx":             {ok, txnAF, txnAF, txnAF},
			"InitProducerId idempotent":           {ok, ok, clustAF, clustAF},
			"CreateTopics alice-*":                {ok, ok, topicAF, topicAF},
			"DescribeConfigs topic t":             {ok, topicAF, topicAF, topicAF},
			"DescribeAcls":                        {ok, clustAF, clustAF, clustAF},
			"Heartbeat g":                         {unkMem, unkMem, groupAF, groupAF},
			"DeleteGroups free-group":             {noGroup, groupAF, groupAF, groupAF},
			"DescribeConfigs broker":              {ok, clustAF, clustAF, clustAF},
			"IncrementalAlterConfigs topic t":     {ok, topicAF, topicAF, topicAF},
			"CreatePartitions t":                  {ok, topicAF, topicAF, topicAF},
			"DeleteRecords t":                     {ok, topicAF, topicAF, topicAF},
			"OffsetForLeaderEpoch t":              {ok, ok, topicAF, ok},
			"DescribeProducers t":                 {ok, ok, topicAF, topicAF},
			"DescribeTransactions tx":             {ok, ok, txnAF, txnAF},
			"EndTxn tx":                           {badPID, badPID, txnAF, txnAF},
			"AddOffsetsToTxn tx g":                {badPID, badPID, txnAF, txnAF},
			"ElectLeaders t":                      {ok, clustAF, clustAF, clustAF},
			"DescribeLogDirs":                     {ok, clustAF, clustAF, clustAF},
			"ListPartitionReassignments":          {ok, clustAF, clustAF, clustAF},
			"DescribeTopicPartitions t":           {ok, ok, topicAF, ok},
			"CreateAcls":                          {ok, clustAF, clustAF, clustAF},
			"ConsumerGroupDescribe g":             {noGroup, noGroup, groupAF, groupAF},
			"ConsumerGroupHeartbeat cg t":         {ok, groupAF, groupAF, groupAF},
			"ConsumerGroupHeartbeat cg free":      {ok, groupAF, groupAF, groupAF},
			"ConsumerGroupDescribe cg":            {ok, groupAF, groupAF, groupAF},
			"DescribeClientQuotas":                {ok, clustAF, clustAF, clustAF},
			"AlterClientQuotas validate":          {ok, clustAF, clustAF, clustAF},
			"DescribeUserScramCredentials":        {ok, clustAF, clustAF, clustAF},
			"AlterUserScramCredentials delete":    {noRes, clustAF, clustAF, clustAF},
			"ShareGroupHeartbeat sg t":            {ok, groupAF, groupAF, groupAF},
			"ShareGroupHeartbeat sg free":         {ok, groupAF, groupAF, groupAF},
			"ShareGroupDescribe sg":               {ok, groupAF, groupAF, groupAF},
			"ShareFetch sq":                       {sessNF, groupAF, groupAF, groupAF},
			"ShareAcknowledge sq":                 {sessNF, groupAF, groupAF, groupAF},
			"AlterShareGroupOffsets sq t":         {ok, groupAF, groupAF, groupAF},
			"DescribeShareGroupOffsets sq t":      {ok, groupAF, groupAF, groupAF},
			"DeleteShareGroupOffsets sq t":        {ok, groupAF, groupAF, groupAF},
			"StreamsGroupHeartbeat stg-t t":       {ok, groupAF, groupAF, groupAF},
			"StreamsGroupHeartbeat stg-free free": {ok, groupAF, groupAF, groupAF},
			"StreamsGroupDescribe stg-t":          {ok, groupAF, groupAF, groupAF},
		},
		// With no ACL on a resource everyone may use it; t, g and tx
		// keep their ACLs, and "alice-" prefixed topics theirs.
		true: {
			"Metadata t":                {ok, ok, topicAF, ok},
			"Metadata free":             {ok, ok, ok, ok},
			"Produce t":                 {ok, ok, topicAF, topicAF},
			"Produce free":              {ok, ok, ok, ok},
			"Fetch t":                   {ok, ok, topicAF, topicAF},
			"Fetch free":                {ok, ok, ok, ok},
			"ListOffsets t":             {ok, ok, topicAF, ok},
			"FindCoordinator group g":   {ok, ok, groupAF, groupAF},
			"FindCoordinator txn tx":    {ok, ok, txnAF, txnAF},
			"JoinGroup g":               {memReq, memReq, groupAF, groupAF},
			"OffsetCommit g t":          {ok, ok, groupAF, groupAF},
			"OffsetFetch g t":           {ok, ok, groupAF, groupAF},
			"DescribeGroups g":          {ok, ok, groupAF, groupAF},
			"InitProducerId tx":         {ok, ok, txnAF, txnAF},
			"InitProducerId other-tx":   {ok, ok, ok, ok},
			"InitProducerId idempotent": {ok, ok, ok, ok},
			// CREATE on the cluster, which no ACL names, allows any topic.
			"CreateTopics alice-*":            {ok, ok, ok, ok},
			"DescribeConfigs topic t":         {ok, topicAF, topicAF, topicAF},
			"DescribeAcls":                    {ok, ok, ok, ok},
			"Heartbeat g":                     {unkMem, unkMem, groupAF, groupAF},
			"DeleteGroups free-group":         {noGroup, noGroup, noGroup, noGroup},
			"DescribeConfigs broker":          {ok, ok, ok, ok},
			"IncrementalAlterConfigs topic t": {ok, topicAF, topicAF, topicAF},
			"CreatePartitions t":              {ok, topicAF, topicAF, topicAF},
			"DeleteRecords t":                 {ok, topicAF, topicAF, topicAF},
			"OffsetForLeaderEpoch t":          {ok, ok, ok, ok}, // CLUSTER_ACTION, which no ACL names
			"DescribeProducers t":             {ok, ok, topicAF, topicAF},
			"DescribeTransactions tx":         {ok, ok, txnAF, txnAF},
			"EndTxn tx":                       {badPID, badPID, txnAF, txnAF},
			"AddOffsetsToTxn tx g":            {badPID, badPID, txnAF, txnAF},
			"ElectLeaders t":                  {ok, ok, ok, ok},
			"DescribeLogDirs":                 {ok, ok, ok, ok},
			"ListPartitionReassignments":      {ok, ok, ok, ok},
			"DescribeTopicPartitions t":       {ok, ok, topicAF, ok},
			"CreateAcls":                      {ok, ok, ok, ok},
			"ConsumerGroupDescribe g":         {noGroup, noGroup, groupAF, groupAF},
			// bob may not DESCRIBE t: he cannot subscribe to it, nor
			// describe cg, whose members are assigned t.
			"ConsumerGroupHeartbeat cg t":      {ok, ok, topicAF, ok},
			"ConsumerGroupHeartbeat cg free":   {ok, ok, ok, ok},
			"ConsumerGroupDescribe cg":         {ok, ok, topicAF, ok},
			"DescribeClientQuotas":             {ok, ok, ok, ok},
			"AlterClientQuotas validate":       {ok, ok, ok, ok},
			"DescribeUserScramCredentials":     {ok, ok, ok, ok},
			"AlterUserScramCredentials delete": {noRes, noRes, noRes, noRes},
			// bob may not DESCRIBE t: he cannot subscribe to it, nor
			// describe sg, whose members are assigned t; nor READ it.
			"ShareGroupHeartbeat sg t":       {ok, ok, topicAF, ok},
			"ShareGroupHeartbeat sg free":    {ok, ok, ok, ok},
			"ShareGroupDescribe sg":          {ok, ok, topicAF, ok},
			"ShareFetch sq":                  {sessNF, sessNF, sessNF, sessNF},
			"ShareAcknowledge sq":            {sessNF, sessNF, sessNF, sessNF},
			"AlterShareGroupOffsets sq t":    {ok, ok, topicAF, topicAF},
			"DescribeShareGroupOffsets sq t": {ok, ok, topicAF, ok},
			"DeleteShareGroupOffsets sq t":   {ok, ok, topicAF, topicAF},
			// bob may not DESCRIBE t, which stg-t's topology reads.
			"StreamsGroupHeartbeat stg-t t":       {ok, ok, topicAF, ok},
			"StreamsGroupHeartbeat stg-free free": {ok, ok, ok, ok},
			// As Kafka 4.2+: a group whose topology reads a topic the
			// principal may not DESCRIBE is answered without it.
			"StreamsGroupDescribe stg-t": {ok, ok, topicAF, ok},
		},
	}
	total, passed := 0, 0
	for _, allowEveryone := range []bool{false, true} {
		t.Run(fmt.Sprintf("allow.everyone=%v", allowEveryone), func(t *testing.T) {
			_, clients := aclServer(t, allowEveryone)
			setUpACLs(t, clients["admin"])
			for _, c := range cases {
				exp, found := want[allowEveryone][c.name]
				if !found {
					t.Fatalf("no expectation for %s", c.name)
				}
				// GREGOR_ACL_SKIP (a regexp of case names) leaves out
				// rows a reference cannot answer: Kafka 4.4's
				// DescribeUserScramCredentials timed out on the
				// reference of compat/kafka-ref/kafka-ref-acl.sh.
				if skip := os.Getenv("GREGOR_ACL_SKIP"); skip != "" && regexp.MustCompile(skip).MatchString(c.name) {
					t.Logf("%s: skipped (GREGOR_ACL_SKIP)", c.name)
					continue
				}
				for i, who := range principals {
					total++
					got := c.code(t, clients[who], who)
					if got != exp[i] {
						t.Errorf("%s as %s: code %d (%s), want %d (%s)", c.name, who, got, kerr.ErrorForCode(got), exp[i], kerr.ErrorForCode(exp[i]))
						continue
					}
					passed++
				}
			}
		})
	}
	t.Logf("authorization matrix: %d of %d (request, principal, allow.everyone) cells as Kafka", passed, total)
}

// TestAuthorizationHidesTopics: an all-topics Metadata lists only the
// topics the principal may DESCRIBE, and KIP-430's authorized operations
// (Metadata, DescribeCluster, DescribeGroups) are the principal's.
func TestAuthorizationHidesTopics(t *testing.T) {
	_, clients := aclServer(t, false)
	setUpACLs(t, clients["admin"])
	names := func(cl *kgo.Client) []string {
		req := kmsg.NewPtrMetadataRequest()
		req.IncludeTopicAuthorizedOperations = true
		var out []string
		for _, mt := range send[*kmsg.MetadataResponse](t, cl, req).Topics {
			out = append(out, fmt.Sprintf("%s:%d", *mt.Topic, mt.AuthorizedOperations))
		}
		return out
	}
	// alice: READ and WRITE, and DESCRIBE for everyone: bits 3, 4, 8.
	if got := strings.Join(names(clients["alice"]), ","); got != fmt.Sprintf("t:%d", 1<<3|1<<4|1<<8) {
		t.Errorf("alice sees %s", got)
	}
	if got := names(clients["bob"]); len(got) != 0 {
		t.Errorf("bob sees %v", got)
	}
	if got := strings.Join(names(clients["anonymous"]), ","); got != fmt.Sprintf("t:%d", 1<<8) {
		t.Errorf("anonymous sees %s", got)
	}
	if got := names(clients["admin"]); len(got) != 2 {
		t.Errorf("admin sees %v", got)
	}

	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.IncludeClusterAuthorizedOperations = true
	if got := send[*kmsg.DescribeClusterResponse](t, clients["alice"], dc); got.ErrorCode != 0 || got.ClusterAuthorizedOperations != 0 {
		t.Errorf("DescribeCluster as alice: %d ops %b, want no error and no operations", got.ErrorCode, got.ClusterAuthorizedOperations)
	}
	if got := send[*kmsg.DescribeClusterResponse](t, clients["admin"], dc); got.ErrorCode != 0 || got.ClusterAuthorizedOperations != clusterOpsBits() {
		t.Errorf("DescribeCluster as admin: %d ops %b", got.ErrorCode, got.ClusterAuthorizedOperations)
	}
	if code := findCoordinatorCode(0, "g")(t, clients["alice"], "alice"); code != 0 {
		t.Fatalf("FindCoordinator: %d", code)
	}
	// A commit makes g exist (as a simple consumer's group).
	if code := settled(offsetCommitCode)(t, clients["alice"], "alice"); code != 0 {
		t.Fatalf("OffsetCommit: %d", code)
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups, dg.IncludeAuthorizedOperations = []string{"g"}, true
	// READ on the group implies DESCRIBE: bits 3 and 8.
	if got := send[*kmsg.DescribeGroupsResponse](t, clients["alice"], dg).Groups[0]; got.ErrorCode != 0 || got.AuthorizedOperations != 1<<3|1<<8 {
		t.Errorf("DescribeGroups as alice: %d ops %b", got.ErrorCode, got.AuthorizedOperations)
	}
}

func clusterOpsBits() int32 {
	var b int32
	for _, op := range []int{5, 9, 10, 11, 12, 7, 8} {
		b |= 1 << op
	}
	return b
}

// TestACLAPIs: ACLs created, described with Kafka's filters and deleted
// over the wire; an ACL the request cannot hold is refused per creation;
// and without an authorizer the three APIs answer SECURITY_DISABLED.
func TestACLAPIs(t *testing.T) {
	_, clients := aclServer(t, false)
	admin := clients["admin"]
	setUpACLs(t, admin)
	describe := func(rt kmsg.ACLResourceType, name *string, pt kmsg.ACLResourcePatternType) []string {
		req := kmsg.NewPtrDescribeACLsRequest()
		req.ResourceType, req.ResourceName, req.ResourcePatternType = rt, name, pt
		req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		resp := send[*kmsg.DescribeACLsResponse](t, admin, req)
		if resp.ErrorCode != 0 {
			t.Fatalf("DescribeAcls: %d", resp.ErrorCode)
		}
		var out []string
		for _, r := range resp.Resources {
			for _, a := range r.ACLs {
				out = append(out, fmt.Sprintf("%s:%s:%s:%s:%s:%s", r.ResourceType, r.ResourceName, r.ResourcePatternType, a.Principal, a.Operation, a.PermissionType))
			}
		}
		return out
	}
	if got := describe(kmsg.ACLResourceTypeAny, nil, kmsg.ACLResourcePatternTypeAny); len(got) != 7 {
		t.Fatalf("all ACLs: %v", got)
	}
	// MATCH: the ACLs that apply to topic alice-x are the prefixed one.
	if got := describe(kmsg.ACLResourceTypeTopic, kmsg.StringPtr("alice-x"), kmsg.ACLResourcePatternTypeMatch); strings.Join(got, ",") != "TOPIC:alice-:PREFIXED:User:alice:CREATE:ALLOW" {
		t.Errorf("MATCH alice-x: %v", got)
	}
	if got := describe(kmsg.ACLResourceTypeTopic, kmsg.StringPtr("alice-x"), kmsg.ACLResourcePatternTypeAny); len(got) != 0 {
		t.Errorf("ANY alice-x (exact names only): %v", got)
	}
	if got := describe(kmsg.ACLResourceTypeGroup, nil, kmsg.ACLResourcePatternTypeLiteral); len(got) != 1 {
		t.Errorf("literal groups: %v", got)
	}

	bad := kmsg.NewPtrCreateACLsRequest()
	bad.Creations = []kmsg.CreateACLsRequestCreation{
		aclCreation(kmsg.ACLResourceTypeCluster, "other", kmsg.ACLResourcePatternTypeLiteral, "User:x", kmsg.ACLOperationAlter, kmsg.ACLPermissionTypeAllow),
		aclCreation(kmsg.ACLResourceTypeTopic, "x", kmsg.ACLResourcePatternTypeLiteral, "x", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
		aclCreation(kmsg.ACLResourceTypeTopic, "x", kmsg.ACLResourcePatternTypeLiteral, "User:x", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
	}
	res := send[*kmsg.CreateACLsResponse](t, admin, bad).Results
	if res[0].ErrorCode != kerr.InvalidRequest.Code || res[1].ErrorCode != kerr.InvalidRequest.Code || res[2].ErrorCode != 0 {
		t.Errorf("create results %+v", res)
	}
	// An ACL Kafka's AclBinding cannot hold fails the whole request.
	anyOp := kmsg.NewPtrCreateACLsRequest()
	anyOp.Creations = []kmsg.CreateACLsRequestCreation{bad.Creations[2],
		aclCreation(kmsg.ACLResourceTypeTopic, "x", kmsg.ACLResourcePatternTypeLiteral, "User:x", kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAllow)}
	for i, r := range send[*kmsg.CreateACLsResponse](t, admin, anyOp).Results {
		if r.ErrorCode != kerr.UnknownServerError.Code {
			t.Errorf("creation %d with operation ANY in the request: %d", i, r.ErrorCode)
		}
	}
	if got := send[*kmsg.CreateACLsResponse](t, clients["alice"], bad).Results[2].ErrorCode; got != clustAF {
		t.Errorf("CreateAcls as alice: %d", got)
	}

	del := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeAny
	f.Principal = kmsg.StringPtr("User:alice")
	f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	del.Filters = append(del.Filters, f)
	dr := send[*kmsg.DeleteACLsResponse](t, admin, del).Results
	if len(dr) != 1 || dr[0].ErrorCode != 0 || len(dr[0].MatchingACLs) != 3 {
		t.Fatalf("delete: %+v", dr)
	}
	if got := describe(kmsg.ACLResourceTypeAny, nil, kmsg.ACLResourcePatternTypeAny); len(got) != 5 {
		t.Errorf("after delete: %v", got)
	}
	// alice lost READ on t.
	if got := fetchCode("t")(t, clients["alice"], "alice"); got != topicAF {
		t.Errorf("fetch t as alice after delete: %d", got)
	}

	// No authorizer: SECURITY_DISABLED.
	plainSrv := startSecureServer(t, nil, Options{})
	cl := newClient(t, plainSrv.addr(t, "PLAINTEXT"))
	if got := describeACLsCode(t, cl, ""); got != kerr.SecurityDisabled.Code {
		t.Errorf("DescribeAcls without authorizer: %d", got)
	}
	if got := send[*kmsg.CreateACLsResponse](t, cl, bad).Results[2].ErrorCode; got != kerr.SecurityDisabled.Code {
		t.Errorf("CreateAcls without authorizer: %d", got)
	}
	if got := send[*kmsg.DeleteACLsResponse](t, cl, del).Results[0].ErrorCode; got != kerr.SecurityDisabled.Code {
		t.Errorf("DeleteAcls without authorizer: %d", got)
	}
}

// TestAuthorizationClientFlow: real clients as alice, with only her ACLs,
// run the common path end to end: a transactional producer (WRITE on tx
// and on t) commits, and a group consumer (READ on g and t) reads the
// record committed; bob's producer is refused.
func TestAuthorizationClientFlow(t *testing.T) {
	s, clients := aclServer(t, false)
	if s == nil {
		t.Skip("runs against gregor only")
	}
	setUpACLs(t, clients["admin"])
	sasl := s.addr(t, "SASL_PLAINTEXT")
	as := func(user string, opts ...kgo.Opt) *kgo.Client {
		return newClient(t, sasl, append(opts, kgo.SASL(plain.Auth{User: user, Pass: user + "-secret"}.AsMechanism()))...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := as("alice", kgo.TransactionalID("tx"), kgo.DefaultProduceTopic("t"))
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("committed")}).FirstErr(); err != nil {
		t.Fatalf("transactional produce as alice: %v", err)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit as alice: %v", err)
	}
	c := as("alice", kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t"), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	for {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consume as alice: %v", ctx.Err())
		}
		if errs := fs.Errors(); len(errs) > 0 {
			t.Fatalf("consume as alice: %v", errs[0].Err)
		}
		if recs := fs.Records(); len(recs) > 0 {
			if string(recs[0].Value) != "committed" {
				t.Fatalf("consumed %q", recs[0].Value)
			}
			break
		}
	}
	if err := c.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit offsets as alice: %v", err)
	}
	b := as("bob", kgo.DisableIdempotentWrite(), kgo.RecordRetries(1))
	err := b.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("no")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce as bob: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
}
