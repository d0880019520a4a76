package io.gregor.compat;

import static io.gregor.compat.Scenarios.describeConfigs;
import static io.gregor.compat.Scenarios.describeTopic;
import static io.gregor.compat.Scenarios.groupProps;
import static io.gregor.compat.Scenarios.offsetOf;
import static io.gregor.compat.Scenarios.rec;
import static io.gregor.compat.Util.*;

import io.gregor.compat.Runner.Env;
import io.gregor.compat.Runner.Scenario;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import org.apache.kafka.clients.admin.AbortTransactionSpec;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.QuorumInfo;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.ElectionNotNeededException;
import org.apache.kafka.common.errors.GroupIdNotFoundException;
import org.apache.kafka.common.errors.InvalidReplicaAssignmentException;
import org.apache.kafka.common.errors.NoReassignmentInProgressException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TopicExistsException;

/**
 * What only the Java client runs: the KIP-848 consumer, transaction.version
 * 2, every Admin call Gregor serves, and the time to a first send with the
 * client telemetry (KIP-714) handshake in the way. compat/java_test.go
 * drives these through the same runner.
 */
final class Extras {
    private Extras() {}

    static void register(Map<String, Scenario> m) {
        m.put("group.resume.consumer", env -> Scenarios.groupResume(env, "consumer"));
        m.put("group.split.consumer", env -> Scenarios.groupSplit(env, "consumer"));
        m.put("txn.v2", Extras::txnV2);
        m.put("txn.interleaved", Extras::txnInterleaved);
        m.put("txn.timeout", Extras::txnTimeout);
        m.put("produce.record_shapes", Extras::recordShapes);
        m.put("admin.topics", Extras::adminTopics);
        m.put("admin.cluster", Extras::adminCluster);
        m.put("admin.groups.classic", env -> adminGroups(env, "classic"));
        m.put("admin.groups.consumer", env -> adminGroups(env, "consumer"));
        m.put("admin.listoffsets", Extras::adminListOffsets);
        m.put("admin.configs", Extras::adminConfigs);
        m.put("consumer.offsets", Extras::consumerOffsets);
        m.put("admin.errors", Extras::adminErrors);
        m.put("admin.reassign", Extras::adminReassign);
        m.put("admin.logdirs", Extras::adminLogDirs);
        m.put("admin.producers", Extras::adminProducers);
        m.put("admin.transactions", Extras::adminTransactions);
        m.put("telemetry.first_send", Extras::firstSend);
    }

    static TransactionDescription describeTxn(Admin a, String id) throws Exception {
        return a.describeTransactions(List.of(id)).description(id).get();
    }

    /**
     * transaction.version 2 (KIP-890): the broker finalizes it, and every
     * transaction the producer ends bumps its epoch, which the coordinator
     * shows; read_committed sees only the committed records.
     */
    static String txnV2(Env env) throws Exception {
        createTopic(env.bootstrap(), env.topic(), 1, Map.of());
        String id = env.topic() + "-txn";
        try (Admin a = admin(env.bootstrap())) {
            FinalizedVersionRange tv = a.describeFeatures().featureMetadata().get().finalizedFeatures().get("transaction.version");
            check(tv != null && tv.maxVersionLevel() >= 2, "transaction.version finalized " + tv + ", want level 2");
            Scenarios.runTransactions(env, id);
            // commitTransaction returns once the coordinator has prepared
            // the commit; its markers, and so CompleteCommit, follow.
            waitForChecked("the transaction after commit, abort, commit", 10000, () -> {
                TransactionState st = describeTxn(a, id).state();
                return st == TransactionState.COMPLETE_COMMIT ? null : "in state " + st;
            });
            TransactionDescription d = describeTxn(a, id);
            // The first transaction ran at the epoch InitProducerId gave;
            // each of the three EndTxn bumped it once under version 2.
            check(d.producerEpoch() >= 3, "producer epoch " + d.producerEpoch() + " after three transactions, want each EndTxn to bump it (3 or more)");
            List<String> want = Scenarios.committedValues();
            List<String> got = Scenarios.readCommitted(env, want.size());
            check(got.equals(want), "read_committed read " + got + ", want " + want);
            return "transaction.version " + tv.maxVersionLevel() + "; producer " + d.producerId() + " at epoch " + d.producerEpoch();
        }
    }

    static List<String> values(List<ConsumerRecord<byte[], byte[]>> rs) {
        List<String> out = new ArrayList<>();
        for (ConsumerRecord<byte[], byte[]> r : rs) {
            out.add(str(r.value()));
        }
        return out;
    }

    /**
     * Two transactional producers interleave on one partition, one
     * commits and one aborts: read_committed returns the committed
     * records only (the fetch's aborted-transactions list at work) and
     * read_uncommitted returns all of them, in offset order.
     */
    static String txnInterleaved(Env env) throws Exception {
        String t = env.topic();
        createTopic(env.bootstrap(), t, 1, Map.of());
        try (KafkaProducer<byte[], byte[]> p1 = producer(env.bootstrap(), Map.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG, t + "-1"));
                KafkaProducer<byte[], byte[]> p2 = producer(env.bootstrap(), Map.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG, t + "-2"))) {
            p1.initTransactions();
            p2.initTransactions();
            p1.beginTransaction();
            p2.beginTransaction();
            for (int round = 0; round < 3; round++) {
                sendAll(p1, List.of(rec(t, 0, null, "c" + round)));
                sendAll(p2, List.of(rec(t, 0, null, "a" + round)));
            }
            p2.abortTransaction();
            sendAll(p1, List.of(rec(t, 0, null, "c3")));
            p1.commitTransaction();
            // A plain record after both: read by every isolation level.
            produce(env.bootstrap(), List.of(rec(t, 0, null, "plain")), Map.of());
        }
        List<String> committed = Scenarios.readCommittedFrom(env.bootstrap(), t, 5);
        check(committed.equals(List.of("c0", "c1", "c2", "c3", "plain")), "read_committed read " + committed + ", want c0..c3 and plain");
        List<String> all = values(readAll(env.bootstrap(), t, 1, 8, Map.of("isolation.level", "read_uncommitted"), 15000));
        check(all.equals(List.of("c0", "a0", "c1", "a1", "c2", "a2", "c3", "plain")), "read_uncommitted read " + all);
        return "";
    }

    /**
     * A transaction left open past transaction.timeout.ms is aborted by
     * the coordinator: the last stable offset moves past it, nothing of it
     * is read committed, and the producer can no longer commit it.
     */
    static String txnTimeout(Env env) throws Exception {
        String t = env.topic();
        createTopic(env.bootstrap(), t, 1, Map.of());
        TopicPartition tp = new TopicPartition(t, 0);
        long start;
        try (Admin a = admin(env.bootstrap());
                KafkaProducer<byte[], byte[]> p = producer(env.bootstrap(), Map.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG, t + "-txn",
                        ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "3000"))) {
            p.initTransactions();
            p.beginTransaction();
            sendAll(p, List.of(rec(t, 0, null, "never")));
            start = System.currentTimeMillis();
            // Kafka checks for timed-out transactions every 10 s by default.
            waitForChecked("the coordinator to abort the timed-out transaction", 40000, () -> {
                TransactionDescription d = describeTxn(a, t + "-txn");
                long lso = a.listOffsets(Map.of(tp, OffsetSpec.latest()), new ListOffsetsOptions(IsolationLevel.READ_COMMITTED)).all().get().get(tp).offset();
                return lso == 2 && d.state() != TransactionState.ONGOING ? null : "transaction " + d.state() + ", last stable offset " + lso;
            });
            long took = System.currentTimeMillis() - start;
            Throwable e = expectThrows("commit a transaction the coordinator aborted", org.apache.kafka.common.KafkaException.class, p::commitTransaction);
            check(Scenarios.readCommitted(env, 0).isEmpty(), "read_committed read records of the timed-out transaction");
            return "aborted " + took + " ms after its last send; commit: " + describe(e);
        }
    }

    /**
     * Records of every shape round-trip: null key, null value (a
     * tombstone), empty value, a header with a null value and repeated
     * header keys; a LogAppendTime topic stamps records with the broker's
     * time, which the produce acknowledgement and the consumer both see.
     */
    static String recordShapes(Env env) throws Exception {
        String t = env.topic(), tl = env.topic() + "-lat";
        createTopic(env.bootstrap(), t, 1, Map.of());
        createTopic(env.bootstrap(), tl, 1, map("message.timestamp.type", "LogAppendTime"));
        ProducerRecord<byte[], byte[]> hdr = new ProducerRecord<>(t, 0, bytes("h"), bytes("v"));
        hdr.headers().add("k", null).add("dup", bytes("1")).add("dup", bytes("2"));
        produce(env.bootstrap(), List.of(new ProducerRecord<>(t, 0, null, bytes("nokey")), new ProducerRecord<>(t, 0, bytes("tomb"), null),
                new ProducerRecord<>(t, 0, bytes("empty"), new byte[0]), hdr), Map.of());
        List<ConsumerRecord<byte[], byte[]>> got = readAll(env.bootstrap(), t, 1, 4, Map.of(), 15000);
        check(got.get(0).key() == null && "nokey".equals(str(got.get(0).value())), "null key read back as " + str(got.get(0).key()));
        check("tomb".equals(str(got.get(1).key())) && got.get(1).value() == null, "null value read back as " + str(got.get(1).value()));
        check(got.get(2).value() != null && got.get(2).value().length == 0, "empty value read back as " + str(got.get(2).value()));
        var hs = got.get(3).headers().toArray();
        check(hs.length == 3 && hs[0].key().equals("k") && hs[0].value() == null && hs[1].key().equals("dup") && "1".equals(str(hs[1].value()))
                && hs[2].key().equals("dup") && "2".equals(str(hs[2].value())), "headers read back as " + got.get(3).headers());
        long before = System.currentTimeMillis();
        var md = produce(env.bootstrap(), List.of(new ProducerRecord<>(tl, 0, TIME_BASE, null, bytes("lat"))), Map.of()).get(0);
        long after = System.currentTimeMillis();
        check(md.timestamp() >= before - 5000 && md.timestamp() <= after + 5000,
                "LogAppendTime topic: the acknowledgement's timestamp " + md.timestamp() + ", want the broker's time near " + before);
        ConsumerRecord<byte[], byte[]> r = readAll(env.bootstrap(), tl, 1, 1, Map.of(), 15000).get(0);
        check(r.timestampType() == org.apache.kafka.common.record.TimestampType.LOG_APPEND_TIME && r.timestamp() == md.timestamp(),
                "LogAppendTime record read back as " + r.timestampType() + " " + r.timestamp() + ", acknowledged " + md.timestamp());
        return "";
    }

    static String adminTopics(Env env) throws Exception {
        String t = env.topic(), t2 = env.topic() + "-2";
        try (Admin a = admin(env.bootstrap())) {
            a.createTopics(List.of(new NewTopic(t, 3, (short) 1)), new CreateTopicsOptions().validateOnly(true)).all().get();
            check(!a.listTopics().names().get().contains(t), "validateOnly CreateTopics created " + t);
            CreateTopicsResult cr = a.createTopics(List.of(new NewTopic(t, 3, (short) 1).configs(map("retention.ms", "7200000")),
                    new NewTopic(t2, 1, (short) 1)));
            cr.all().get();
            check(cr.numPartitions(t).get() == 3 && cr.replicationFactor(t).get() == 1,
                    "CreateTopics answered " + cr.numPartitions(t).get() + " partitions x" + cr.replicationFactor(t).get() + ", want 3 x1");
            Uuid id = cr.topicId(t).get(), id2 = cr.topicId(t2).get();
            check(!Uuid.ZERO_UUID.equals(id) && !id.equals(id2), "topic ids " + id + " and " + id2);
            ConfigEntry ret = cr.config(t).get().get("retention.ms");
            check(ret != null && "7200000".equals(ret.value()), "CreateTopics answered retention.ms " + ret);
            expectThrows("create " + t + " again", TopicExistsException.class,
                    () -> a.createTopics(List.of(new NewTopic(t, 1, (short) 1))).all().get());
            Set<String> names = a.listTopics().names().get();
            check(names.containsAll(List.of(t, t2)), "listTopics: " + names + " lacks " + t + " or " + t2);
            Set<String> internal = a.listTopics(new ListTopicsOptions().listInternal(true)).names().get();
            check(internal.containsAll(names), "listTopics with internal topics lost some: " + internal);
            // One partition per response: with DescribeTopicPartitions the
            // client pages through the topic with its cursor; without, it
            // falls back to Metadata.
            TopicDescription d = a.describeTopics(List.of(t), new DescribeTopicsOptions().partitionSizeLimitPerResponse(1))
                    .allTopicNames().get().get(t);
            check(d.topicId().equals(id) && d.partitions().size() == 3 && !d.isInternal(), "describeTopics " + d);
            for (int p = 0; p < 3; p++) {
                TopicPartitionInfo pi = d.partitions().get(p);
                check(pi.partition() == p && pi.leader() != null && pi.leader().id() == 1 && pi.replicas().size() == 1
                        && pi.isr().size() == 1 && pi.isr().get(0).id() == 1, "partition " + p + ": " + pi);
            }
            TopicDescription byId = a.describeTopics(TopicCollection.ofTopicIds(List.of(id2))).allTopicIds().get().get(id2);
            check(byId != null && byId.name().equals(t2) && byId.partitions().size() == 1, "describeTopics by id " + id2 + ": " + byId);
            a.deleteTopics(TopicCollection.ofTopicIds(List.of(id2))).all().get();
            a.deleteTopics(List.of(t)).all().get();
            waitForChecked("topics listed after DeleteTopics", 15000, () -> {
                Set<String> now = a.listTopics().names().get();
                return now.contains(t) || now.contains(t2) ? "listed: " + now : null;
            });
        }
        return "";
    }

    static String adminCluster(Env env) throws Exception {
        List<String> note = new ArrayList<>();
        try (Admin a = admin(env.bootstrap())) {
            DescribeClusterResult c = a.describeCluster();
            String id = c.clusterId().get();
            Collection<org.apache.kafka.common.Node> nodes = c.nodes().get();
            check(id != null && !id.isEmpty(), "cluster id " + id);
            check(nodes.size() == 1 && nodes.iterator().next().id() == 1, "nodes " + nodes);
            check(c.controller().get().id() == 1, "controller " + c.controller().get());
            FeatureMetadata f = a.describeFeatures().featureMetadata().get();
            Map<String, FinalizedVersionRange> fin = f.finalizedFeatures();
            check(fin.containsKey("transaction.version") && fin.containsKey("group.version"),
                    "finalized features " + fin + " lack transaction.version or group.version");
            check(f.supportedFeatures().keySet().containsAll(fin.keySet()), "finalized " + fin.keySet() + " not all supported: " + f.supportedFeatures());
            check(f.finalizedFeaturesEpoch().isPresent(), "no finalized features epoch");
            note.add("features " + new TreeMap<>(fin));
            QuorumInfo q = a.describeMetadataQuorum().quorumInfo().get();
            check(q.leaderId() == 1 && q.voters().stream().anyMatch(v -> v.replicaId() == 1) && q.highWatermark() >= 0,
                    "metadata quorum leader " + q.leaderId() + " voters " + q.voters() + " high watermark " + q.highWatermark());
            note.add("quorum leader " + q.leaderId() + " epoch " + q.leaderEpoch() + " hw " + q.highWatermark());
            ConfigEntry auto = describeConfigs(a, new ConfigResource(ConfigResource.Type.BROKER, "1")).get("auto.create.topics.enable");
            check(auto != null && "true".equals(auto.value()), "broker 1 auto.create.topics.enable " + auto + ", want true");
        }
        try (Admin a = admin(env.strict())) {
            ConfigEntry auto = describeConfigs(a, new ConfigResource(ConfigResource.Type.BROKER, "1")).get("auto.create.topics.enable");
            check(auto != null && "false".equals(auto.value()), "the auto-create-off broker's auto.create.topics.enable " + auto + ", want false");
        }
        return String.join("; ", note);
    }

    static ConsumerGroupDescription describeGroup(Admin a, String group) throws Exception {
        return a.describeConsumerGroups(List.of(group)).describedGroups().get(group).get();
    }

    static Optional<GroupListing> listed(Admin a, String group) throws Exception {
        return a.listGroups().all().get().stream().filter(g -> g.groupId().equals(group)).findFirst();
    }

    static Set<Integer> partitionsOf(MemberDescription m) {
        Set<Integer> out = new HashSet<>();
        for (TopicPartition tp : m.assignment().topicPartitions()) {
            out.add(tp.partition());
        }
        return out;
    }

    /**
     * The group Admin calls around a live and then an empty group of the
     * given protocol: listGroups, describeConsumerGroups (ConsumerGroupDescribe
     * for a KIP-848 group), list/alter/delete offsets, deleteConsumerGroups.
     */
    static String adminGroups(Env env, String protocol) throws Exception {
        String t = env.topic(), group = t + "-group";
        GroupType type = protocol.equals("classic") ? GroupType.CLASSIC : GroupType.CONSUMER;
        createTopic(env.bootstrap(), t, 2, Map.of());
        List<ProducerRecord<byte[], byte[]>> recs = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            recs.add(rec(t, i % 2, null, String.valueOf(i)));
        }
        produce(env.bootstrap(), recs, Map.of());
        TopicPartition p0 = new TopicPartition(t, 0), p1 = new TopicPartition(t, 1);
        List<String> note = new ArrayList<>();
        try (Admin a = admin(env.bootstrap())) {
            Map<String, Object> props = groupProps(group, protocol, 10000);
            props.put("client.id", group + "-member");
            try (KafkaConsumer<byte[], byte[]> c = consumer(env.bootstrap(), props)) {
                c.subscribe(List.of(t));
                int read = 0;
                long deadline = System.currentTimeMillis() + 30000;
                while (read < 10) {
                    check(System.currentTimeMillis() < deadline, "the member read " + read + " of 10");
                    read += c.poll(Duration.ofMillis(200)).count();
                }
                c.commitSync();
                ConsumerGroupDescription d = describeGroup(a, group);
                check(d.type() == type && d.groupState() == GroupState.STABLE && d.members().size() == 1 && !d.isSimpleConsumerGroup(),
                        "live group described as " + d.type() + " " + d.groupState() + " with " + d.members().size() + " members");
                MemberDescription m = d.members().iterator().next();
                check(m.clientId().equals(group + "-member") && partitionsOf(m).equals(Set.of(0, 1)),
                        "member " + m.clientId() + " assigned " + partitionsOf(m) + ", want " + group + "-member with 0,1");
                check(d.coordinator() != null && d.coordinator().id() == 1, "coordinator " + d.coordinator());
                if (type == GroupType.CONSUMER) {
                    check(m.memberEpoch().orElse(0) > 0 && d.groupEpoch().orElse(0) > 0,
                            "member epoch " + m.memberEpoch() + " group epoch " + d.groupEpoch() + ", want both set");
                    note.add("assignor " + d.partitionAssignor() + ", group epoch " + d.groupEpoch().get());
                } else {
                    note.add("assignor " + d.partitionAssignor());
                }
                GroupListing l = listed(a, group).orElseThrow(() -> new Runner.Fail("listGroups does not list the live group " + group));
                check(l.type().equals(Optional.of(type)) && l.groupState().equals(Optional.of(GroupState.STABLE)) && "consumer".equals(l.protocol()),
                        "listGroups: " + l.type() + " " + l.groupState() + " protocol " + l.protocol());
                check(a.listGroups(org.apache.kafka.clients.admin.ListGroupsOptions.forConsumerGroups().withTypes(Set.of(type)))
                        .all().get().stream().anyMatch(g -> g.groupId().equals(group)), "listGroups filtered by type " + type + " misses " + group);
            } // close leaves the group
            waitForChecked("the group empty after its member left", 15000, () -> {
                ConsumerGroupDescription d = describeGroup(a, group);
                return d.groupState() == GroupState.EMPTY && d.members().isEmpty() ? null : d.groupState() + " with " + d.members().size() + " members";
            });
            Map<TopicPartition, OffsetAndMetadata> offs = a.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            check(offs.get(p0) != null && offs.get(p0).offset() == 5 && offs.get(p1) != null && offs.get(p1).offset() == 5,
                    "committed offsets " + offs + ", want 5 on both partitions");
            a.alterConsumerGroupOffsets(group, Map.of(p0, new OffsetAndMetadata(2, "rewound"))).all().get();
            offs = a.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            check(offs.get(p0) != null && offs.get(p0).offset() == 2 && "rewound".equals(offs.get(p0).metadata()),
                    "after alterConsumerGroupOffsets p0 is " + offs.get(p0) + ", want 2 with metadata rewound");
            a.deleteConsumerGroupOffsets(group, Set.of(p1)).all().get();
            offs = a.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            check(offs.get(p1) == null && offs.get(p0) != null, "after deleteConsumerGroupOffsets(p1) offsets are " + offs);
            a.deleteConsumerGroups(List.of(group)).all().get();
            check(listed(a, group).isEmpty(), "listGroups still lists " + group + " after deleteConsumerGroups");
            try {
                ConsumerGroupDescription d = describeGroup(a, group);
                check(d.groupState() == GroupState.DEAD, "a deleted group described as " + d.groupState());
            } catch (Exception e) {
                check(root(e) instanceof GroupIdNotFoundException, "describe a deleted group: " + describe(e));
            }
        }
        return String.join("; ", note);
    }

    /**
     * The ListOffsets specs beyond listoffsets.time: the record with the
     * highest timestamp (KIP-734, not the last one written), the local log
     * start (KIP-405's earliest-local, the log start without tiering) after
     * DeleteRecords, and several partitions in one call.
     */
    static String adminListOffsets(Env env) throws Exception {
        String t = env.topic();
        createTopic(env.bootstrap(), t, 2, Map.of());
        // Timestamps out of order: the highest is the fourth record's.
        long[] stamps = {TIME_BASE + 1000, TIME_BASE + 3000, TIME_BASE + 2000, TIME_BASE + 9000, TIME_BASE + 4000, TIME_BASE + 5000};
        List<ProducerRecord<byte[], byte[]>> recs = new ArrayList<>();
        for (int i = 0; i < stamps.length; i++) {
            recs.add(new ProducerRecord<>(t, 0, stamps[i], null, bytes(String.valueOf(i))));
        }
        recs.add(new ProducerRecord<>(t, 1, TIME_BASE, null, bytes("p1")));
        produce(env.bootstrap(), recs, Map.of(ProducerConfig.LINGER_MS_CONFIG, "0"));
        TopicPartition p0 = new TopicPartition(t, 0), p1 = new TopicPartition(t, 1);
        // Each spec is checked on its own, so one wrong answer does not
        // hide the others.
        List<String> wrong = new ArrayList<>();
        try (Admin a = admin(env.bootstrap())) {
            var max = Scenarios.listOffsets(a, p0, OffsetSpec.maxTimestamp()).get(p0);
            if (max.offset() != 3 || max.timestamp() != TIME_BASE + 9000) {
                wrong.add("max timestamp: offset " + max.offset() + " at " + max.timestamp() + ", want offset 3 (the record stamped "
                        + (TIME_BASE + 9000) + " in the middle of its batch)");
            }
            var both = a.listOffsets(Map.of(p0, OffsetSpec.latest(), p1, OffsetSpec.latest())).all().get();
            if (both.get(p0).offset() != stamps.length || both.get(p1).offset() != 1) {
                wrong.add("latest of both partitions: " + both.get(p0).offset() + " and " + both.get(p1).offset() + ", want " + stamps.length + " and 1");
            }
            a.deleteRecords(Map.of(p0, org.apache.kafka.clients.admin.RecordsToDelete.beforeOffset(2))).all().get();
            long local = offsetOf(a, p0, OffsetSpec.earliestLocal()), earliest = offsetOf(a, p0, OffsetSpec.earliest());
            if (local != 2 || earliest != 2) {
                wrong.add("after DeleteRecords to 2: earliest " + earliest + ", earliest local " + local + ", want 2 and 2");
            }
        }
        check(wrong.isEmpty(), String.join("; ", wrong));
        return "";
    }

    /**
     * DescribeConfigs with synonyms, types and documentation, and each
     * IncrementalAlterConfigs operation (validate only, SET, APPEND,
     * SUBTRACT, DELETE, and two SETs the broker must refuse).
     */
    static String adminConfigs(Env env) throws Exception {
        String t = env.topic();
        createTopic(env.bootstrap(), t, 1, map("retention.ms", "3600000", "cleanup.policy", "delete"));
        ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, t);
        try (Admin a = admin(env.bootstrap())) {
            Map<String, ConfigEntry> got = new java.util.HashMap<>();
            for (ConfigEntry e : a.describeConfigs(List.of(res), new org.apache.kafka.clients.admin.DescribeConfigsOptions()
                    .includeSynonyms(true).includeDocumentation(true)).all().get().get(res).entries()) {
                got.put(e.name(), e);
            }
            ConfigEntry ret = got.get("retention.ms");
            check(ret != null && "3600000".equals(ret.value()) && ret.type() == ConfigEntry.ConfigType.LONG
                    && ret.documentation() != null && !ret.documentation().isEmpty(), "retention.ms described as " + ret);
            var syn = ret.synonyms();
            // Kafka lists the broker's log.retention.* among the synonyms
            // only where the broker sets one; the topic's own comes first.
            check(!syn.isEmpty() && syn.get(0).source() == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG && syn.get(0).name().equals("retention.ms")
                    && syn.get(0).value().equals("3600000"), "retention.ms synonyms " + syn + ", want the topic's value first");
            Map<String, ConfigEntry.ConfigType> types = Map.of("min.insync.replicas", ConfigEntry.ConfigType.INT,
                    "cleanup.policy", ConfigEntry.ConfigType.LIST, "compression.type", ConfigEntry.ConfigType.STRING,
                    "unclean.leader.election.enable", ConfigEntry.ConfigType.BOOLEAN);
            for (var e : types.entrySet()) {
                ConfigEntry c = got.get(e.getKey());
                check(c != null && c.type() == e.getValue(), e.getKey() + " described as " + c + ", want type " + e.getValue());
            }
            a.incrementalAlterConfigs(Map.of(res, List.of(op("retention.ms", "1", AlterConfigOp.OpType.SET))),
                    new org.apache.kafka.clients.admin.AlterConfigsOptions().validateOnly(true)).all().get();
            check("3600000".equals(describeConfigs(a, res).get("retention.ms").value()), "a validateOnly SET changed retention.ms");
            // Kafka answers an alteration once its controller committed it;
            // the broker that DescribeConfigs reads applies it a moment
            // later, so each read waits for the value.
            a.incrementalAlterConfigs(Map.of(res, List.of(op("cleanup.policy", "compact", AlterConfigOp.OpType.APPEND)))).all().get();
            waitForChecked("cleanup.policy after APPEND compact", 10000, () -> {
                String cp = describeConfigs(a, res).get("cleanup.policy").value();
                return "delete,compact".equals(cp) ? null : cp + ", want delete,compact";
            });
            a.incrementalAlterConfigs(Map.of(res, List.of(op("cleanup.policy", "delete", AlterConfigOp.OpType.SUBTRACT)))).all().get();
            waitForChecked("cleanup.policy after SUBTRACT delete", 10000, () -> {
                String cp = describeConfigs(a, res).get("cleanup.policy").value();
                return "compact".equals(cp) ? null : cp + ", want compact";
            });
            a.incrementalAlterConfigs(Map.of(res, List.of(op("retention.ms", null, AlterConfigOp.OpType.DELETE)))).all().get();
            waitForChecked("retention.ms after DELETE", 10000, () -> {
                ConfigEntry back = describeConfigs(a, res).get("retention.ms");
                return "604800000".equals(back.value()) && back.source() != ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG
                        ? null : back + ", want the default 604800000";
            });
            expectThrows("SET retention.ms=abc", org.apache.kafka.common.errors.InvalidConfigurationException.class,
                    () -> a.incrementalAlterConfigs(Map.of(res, List.of(op("retention.ms", "abc", AlterConfigOp.OpType.SET)))).all().get());
            expectThrows("SET an unknown topic config", org.apache.kafka.common.errors.InvalidConfigurationException.class,
                    () -> a.incrementalAlterConfigs(Map.of(res, List.of(op("no.such.config", "1", AlterConfigOp.OpType.SET)))).all().get());
        }
        return "";
    }

    static AlterConfigOp op(String name, String value, AlterConfigOp.OpType type) {
        return new AlterConfigOp(new ConfigEntry(name, value), type);
    }

    /**
     * The consumer's own offset calls: beginningOffsets, endOffsets,
     * offsetsForTimes, position, commitSync, committed and currentLag.
     */
    static String consumerOffsets(Env env) throws Exception {
        String t = env.topic();
        createTopic(env.bootstrap(), t, 2, Map.of());
        List<ProducerRecord<byte[], byte[]>> recs = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            recs.add(new ProducerRecord<>(t, i % 2, TIME_BASE + i * 1000L, null, bytes(String.valueOf(i))));
        }
        produce(env.bootstrap(), recs, Map.of());
        TopicPartition p0 = new TopicPartition(t, 0), p1 = new TopicPartition(t, 1);
        List<TopicPartition> both = List.of(p0, p1);
        Map<String, Object> props = groupProps(t + "-group", "classic", 10000);
        try (KafkaConsumer<byte[], byte[]> c = consumer(env.bootstrap(), props)) {
            Map<TopicPartition, Long> begin = c.beginningOffsets(both), end = c.endOffsets(both);
            check(begin.equals(Map.of(p0, 0L, p1, 0L)) && end.equals(Map.of(p0, 5L, p1, 5L)), "beginning " + begin + " end " + end + ", want 0 and 5");
            var times = c.offsetsForTimes(Map.of(p0, TIME_BASE + 3000, p1, TIME_BASE + 3000));
            check(times.get(p0) != null && times.get(p0).offset() == 2 && times.get(p0).timestamp() == TIME_BASE + 4000
                    && times.get(p1) != null && times.get(p1).offset() == 1 && times.get(p1).timestamp() == TIME_BASE + 3000,
                    "offsetsForTimes " + times + ", want p0 offset 2 (stamped +4s) and p1 offset 1 (+3s)");
            var future = c.offsetsForTimes(Map.of(p0, TIME_BASE + 60000));
            check(future.get(p0) == null, "offsetsForTimes after every record: " + future.get(p0) + ", want none");
            c.assign(both);
            c.seek(p0, 2);
            List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 15000;
            while (got.size() < 8 && System.currentTimeMillis() < deadline) {
                c.poll(Duration.ofMillis(200)).forEach(got::add);
            }
            check(got.size() == 8, "read " + got.size() + " records from p0 at 2 and p1 from the start, want 8");
            check(c.position(p0) == 5 && c.position(p1) == 5, "positions " + c.position(p0) + " and " + c.position(p1) + ", want 5 and 5");
            check(c.currentLag(p0).equals(java.util.OptionalLong.of(0)), "currentLag of p0 " + c.currentLag(p0) + ", want 0");
            c.commitSync();
            Map<TopicPartition, OffsetAndMetadata> com = c.committed(new HashSet<>(both));
            check(com.get(p0) != null && com.get(p0).offset() == 5 && com.get(p1) != null && com.get(p1).offset() == 5,
                    "committed " + com + ", want 5 and 5");
        }
        return "";
    }

    /** One refusal: call must fail with want (or a cause of that class); otherwise its outcome is added to wrong. */
    static void refused(List<String> wrong, String what, Class<? extends Throwable> want, CheckedRunnable call) {
        try {
            expectThrows(what, want, call);
        } catch (Runner.Fail f) {
            wrong.add(f.getMessage());
        }
    }

    /**
     * The Admin calls' refusals, each with the error Kafka gives: every
     * one is checked, and the wrong ones are reported together.
     */
    static String adminErrors(Env env) throws Exception {
        String t = env.topic(), missing = env.topic() + "-missing";
        createTopic(env.bootstrap(), t, 2, Map.of());
        produce(env.bootstrap(), Scenarios.numbered(t, 5), Map.of());
        TopicPartition p0 = new TopicPartition(t, 0);
        List<String> wrong = new ArrayList<>();
        try (Admin a = admin(env.bootstrap())) {
            refused(wrong, "deleteRecords past the high watermark", org.apache.kafka.common.errors.OffsetOutOfRangeException.class,
                    () -> a.deleteRecords(Map.of(p0, org.apache.kafka.clients.admin.RecordsToDelete.beforeOffset(10))).all().get());
            refused(wrong, "createTopics with replication factor 2 on one broker", org.apache.kafka.common.errors.InvalidReplicationFactorException.class,
                    () -> a.createTopics(List.of(new NewTopic(t + "-rf2", 1, (short) 2))).all().get());
            refused(wrong, "createTopics named bad/name", org.apache.kafka.common.errors.InvalidTopicException.class,
                    () -> a.createTopics(List.of(new NewTopic("bad/name", 1, (short) 1))).all().get());
            refused(wrong, "createPartitions down to 1 of 2", org.apache.kafka.common.errors.InvalidPartitionsException.class,
                    () -> a.createPartitions(Map.of(t, org.apache.kafka.clients.admin.NewPartitions.increaseTo(1))).all().get());
            refused(wrong, "describeConfigs of a missing topic", org.apache.kafka.common.errors.UnknownTopicOrPartitionException.class,
                    () -> a.describeConfigs(List.of(new ConfigResource(ConfigResource.Type.TOPIC, missing))).all().get());
            refused(wrong, "deleteTopics of a missing topic", org.apache.kafka.common.errors.UnknownTopicOrPartitionException.class,
                    () -> a.deleteTopics(List.of(missing)).all().get());
            refused(wrong, "deleteConsumerGroups of a missing group", GroupIdNotFoundException.class,
                    () -> a.deleteConsumerGroups(List.of(t + "-nogroup")).all().get());
            refused(wrong, "electLeaders of a missing partition", org.apache.kafka.common.errors.UnknownTopicOrPartitionException.class, () -> {
                Optional<Throwable> e = a.electLeaders(ElectionType.PREFERRED, Set.of(new TopicPartition(missing, 0))).partitions().get()
                        .get(new TopicPartition(missing, 0));
                if (e != null && e.isPresent()) {
                    throw new java.util.concurrent.ExecutionException(e.get());
                }
            });
            refused(wrong, "describeTransactions of a missing transactional id", org.apache.kafka.common.errors.TransactionalIdNotFoundException.class,
                    () -> a.describeTransactions(List.of(t + "-notxn")).all().get());
            try {
                Map<TopicPartition, OffsetAndMetadata> none = a.listConsumerGroupOffsets(t + "-nogroup").partitionsToOffsetAndMetadata().get();
                if (!none.isEmpty()) {
                    wrong.add("listConsumerGroupOffsets of a missing group: " + none + ", want none");
                }
            } catch (Exception e) {
                wrong.add("listConsumerGroupOffsets of a missing group: " + describe(e) + ", want no offsets");
            }
        }
        check(wrong.isEmpty(), String.join("; ", wrong));
        return "";
    }

    static String adminReassign(Env env) throws Exception {
        String t = env.topic();
        createTopic(env.bootstrap(), t, 2, Map.of());
        TopicPartition p0 = new TopicPartition(t, 0), p1 = new TopicPartition(t, 1);
        try (Admin a = admin(env.bootstrap())) {
            Map<TopicPartition, PartitionReassignment> ongoing = a.listPartitionReassignments(Set.of(p0, p1)).reassignments().get();
            check(ongoing.isEmpty(), "reassignments before any: " + ongoing);
            a.alterPartitionReassignments(Map.of(p0, Optional.of(new NewPartitionReassignment(List.of(1))))).all().get();
            waitForChecked("the reassignment of " + p0 + " to its own replica to finish", 10000, () -> {
                Map<TopicPartition, PartitionReassignment> r = a.listPartitionReassignments().reassignments().get();
                return r.containsKey(p0) ? "ongoing: " + r.get(p0) : null;
            });
            expectThrows("reassign " + p1 + " to broker 2, which does not exist", InvalidReplicaAssignmentException.class,
                    () -> a.alterPartitionReassignments(Map.of(p1, Optional.of(new NewPartitionReassignment(List.of(2))))).all().get());
            expectThrows("cancel a reassignment of " + p0 + " that is not in progress", NoReassignmentInProgressException.class,
                    () -> a.alterPartitionReassignments(Map.of(p0, Optional.empty())).all().get());
            for (ElectionType et : ElectionType.values()) {
                Map<TopicPartition, Optional<Throwable>> r = a.electLeaders(et, Set.of(p0, p1)).partitions().get();
                for (TopicPartition tp : List.of(p0, p1)) {
                    Optional<Throwable> err = r.get(tp);
                    check(err != null && err.isPresent() && err.get() instanceof ElectionNotNeededException,
                            et + " election of " + tp + " (led by its only replica) answered " + err + ", want ELECTION_NOT_NEEDED");
                }
            }
            TopicDescription d = describeTopic(a, t);
            for (TopicPartitionInfo pi : d.partitions()) {
                check(pi.leader() != null && pi.leader().id() == 1 && pi.replicas().size() == 1 && pi.replicas().get(0).id() == 1,
                        "after reassignment and elections partition " + pi);
            }
        }
        return "";
    }

    static String adminLogDirs(Env env) throws Exception {
        String t = env.topic();
        createTopic(env.bootstrap(), t, 1, Map.of());
        produce(env.bootstrap(), Scenarios.numbered(t, 100), Map.of());
        TopicPartition tp = new TopicPartition(t, 0);
        try (Admin a = admin(env.bootstrap())) {
            Map<Integer, Map<String, LogDirDescription>> all = a.describeLogDirs(List.of(1)).allDescriptions().get();
            Map<String, LogDirDescription> dirs = all.get(1);
            check(dirs != null && !dirs.isEmpty(), "describeLogDirs(1): " + all);
            ReplicaInfo found = null;
            String where = null;
            for (Map.Entry<String, LogDirDescription> e : dirs.entrySet()) {
                check(e.getValue().error() == null, "log dir " + e.getKey() + ": " + e.getValue().error());
                ReplicaInfo ri = e.getValue().replicaInfos().get(tp);
                if (ri != null) {
                    check(found == null, tp + " in two log dirs");
                    found = ri;
                    where = e.getKey();
                }
            }
            check(found != null, tp + " in no log dir: " + dirs.keySet());
            check(found.size() > 100 * 1 && !found.isFuture() && found.offsetLag() == 0, tp + " in " + where + ": size "
                    + found.size() + " lag " + found.offsetLag() + " future " + found.isFuture() + ", want 100 records' bytes, lag 0");
            LogDirDescription ld = dirs.get(where);
            check(ld.totalBytes().isPresent() && ld.usableBytes().isPresent() && ld.usableBytes().getAsLong() <= ld.totalBytes().getAsLong(),
                    "log dir " + where + " total " + ld.totalBytes() + " usable " + ld.usableBytes());
            return where + ": " + found.size() + " bytes";
        }
    }

    static String adminProducers(Env env) throws Exception {
        String t = env.topic();
        createTopic(env.bootstrap(), t, 2, Map.of());
        TopicPartition p0 = new TopicPartition(t, 0), p1 = new TopicPartition(t, 1);
        List<ProducerRecord<byte[], byte[]>> recs = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            recs.add(rec(t, 0, null, String.valueOf(i)));
        }
        long before = System.currentTimeMillis();
        produce(env.bootstrap(), recs, Map.of(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true"));
        recs = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            recs.add(rec(t, 1, null, String.valueOf(i)));
        }
        produce(env.bootstrap(), recs, Map.of(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false"));
        try (Admin a = admin(env.bootstrap())) {
            Map<TopicPartition, org.apache.kafka.clients.admin.DescribeProducersResult.PartitionProducerState> r =
                    a.describeProducers(List.of(p0, p1)).all().get();
            List<ProducerState> ps = r.get(p0).activeProducers();
            check(ps.size() == 1, "describeProducers " + p0 + ": " + ps + ", want the idempotent producer");
            ProducerState s = ps.get(0);
            check(s.producerId() >= 0 && s.producerEpoch() == 0 && s.lastSequence() == 9 && s.currentTransactionStartOffset().isEmpty()
                    && s.lastTimestamp() >= before - 1000, "producer state " + s + ", want epoch 0, last sequence 9, no transaction");
            check(r.get(p1).activeProducers().isEmpty(), "describeProducers " + p1 + " (a plain producer's records): " + r.get(p1).activeProducers());
            return "producer " + s.producerId();
        }
    }

    /**
     * A transaction left open: listTransactions and describeTransactions
     * show it, describeProducers its start offset, the last stable offset
     * stays before it; abortTransaction writes the partition's abort marker;
     * fenceProducers bumps the epoch and the open producer is fenced.
     */
    static String adminTransactions(Env env) throws Exception {
        String t = env.topic(), id = t + "-txn";
        createTopic(env.bootstrap(), t, 1, Map.of());
        TopicPartition tp = new TopicPartition(t, 0);
        try (Admin a = admin(env.bootstrap());
                KafkaProducer<byte[], byte[]> p = producer(env.bootstrap(), Map.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG, id))) {
            p.initTransactions();
            p.beginTransaction();
            List<ProducerRecord<byte[], byte[]>> recs = new ArrayList<>();
            for (int i = 0; i < 5; i++) {
                recs.add(rec(t, 0, null, "open-" + i));
            }
            sendAll(p, recs);
            Collection<TransactionListing> ls = a.listTransactions().all().get();
            TransactionListing l = ls.stream().filter(x -> x.transactionalId().equals(id)).findFirst()
                    .orElseThrow(() -> new Runner.Fail("listTransactions does not list " + id + ": " + ls));
            check(l.state() == TransactionState.ONGOING, "listTransactions: " + id + " is " + l.state());
            Collection<TransactionListing> byPid = a.listTransactions(new org.apache.kafka.clients.admin.ListTransactionsOptions()
                    .filterProducerIds(List.of(l.producerId()))).all().get();
            check(byPid.size() == 1 && byPid.iterator().next().transactionalId().equals(id), "listTransactions by producer id: " + byPid);
            TransactionDescription d = describeTxn(a, id);
            check(d.state() == TransactionState.ONGOING && d.producerId() == l.producerId() && d.topicPartitions().equals(Set.of(tp))
                    && d.coordinatorId() == 1 && d.transactionStartTimeMs().isPresent(), "describeTransactions: " + d);
            List<ProducerState> ps = a.describeProducers(List.of(tp)).partitionResult(tp).get().activeProducers();
            check(ps.size() == 1 && ps.get(0).producerId() == d.producerId() && ps.get(0).currentTransactionStartOffset().equals(java.util.OptionalLong.of(0)),
                    "describeProducers: " + ps + ", want producer " + d.producerId() + " with a transaction from offset 0");
            ProducerState s = ps.get(0);
            long lso = a.listOffsets(Map.of(tp, OffsetSpec.latest()), new ListOffsetsOptions(IsolationLevel.READ_COMMITTED)).all().get().get(tp).offset();
            long hw = offsetOf(a, tp, OffsetSpec.latest());
            check(lso == 0 && hw == 5, "open transaction: last stable offset " + lso + " high watermark " + hw + ", want 0 and 5");
            a.abortTransaction(new AbortTransactionSpec(tp, s.producerId(), (short) s.producerEpoch(), s.coordinatorEpoch().orElse(0))).all().get();
            waitForChecked("the last stable offset to pass the abort marker", 10000, () -> {
                long now = a.listOffsets(Map.of(tp, OffsetSpec.latest()), new ListOffsetsOptions(IsolationLevel.READ_COMMITTED)).all().get().get(tp).offset();
                return now == 6 ? null : "at " + now + ", want 6 (5 records and the marker)";
            });
            List<ProducerState> after = a.describeProducers(List.of(tp)).partitionResult(tp).get().activeProducers();
            check(after.size() == 1 && after.get(0).currentTransactionStartOffset().isEmpty(), "describeProducers after the abort: " + after);
            a.fenceProducers(List.of(id)).all().get();
            TransactionDescription fenced = describeTxn(a, id);
            check(fenced.producerEpoch() > d.producerEpoch(), "after fenceProducers the epoch is " + fenced.producerEpoch() + ", was " + d.producerEpoch());
            expectThrows("commit after fenceProducers", ProducerFencedException.class, p::commitTransaction);
            List<ConsumerRecord<byte[], byte[]>> none = new ArrayList<>();
            try (KafkaConsumer<byte[], byte[]> c = consumer(env.bootstrap(), Map.of("isolation.level", "read_committed"))) {
                c.assign(List.of(tp));
                c.seekToBeginning(List.of(tp));
                long until = System.currentTimeMillis() + 1500;
                while (System.currentTimeMillis() < until) {
                    c.poll(Duration.ofMillis(200)).forEach(none::add);
                }
            }
            check(none.isEmpty(), "read_committed read " + none.size() + " records of the aborted transaction");
            return "producer " + d.producerId() + " epoch " + d.producerEpoch() + " -> " + fenced.producerEpoch() + " (" + fenced.state() + ")";
        }
    }

    /**
     * KIP-714: a client asks for telemetry subscriptions when the broker
     * advertises GetTelemetrySubscriptions; whether it does or not, the
     * first send must not wait on it.
     */
    static String firstSend(Env env) throws Exception {
        String t = env.topic();
        createTopic(env.bootstrap(), t, 1, Map.of());
        // Twice: the first producer of a JVM also loads the producer's
        // classes; the second shows what the client's handshakes cost.
        long[] ms = new long[2];
        String instance = "";
        for (int i = 0; i < 2; i++) {
            long start = System.nanoTime();
            try (KafkaProducer<byte[], byte[]> p = producer(env.bootstrap(), Map.of())) {
                p.send(rec(t, 0, null, "first-" + i)).get();
                ms[i] = (System.nanoTime() - start) / 1_000_000;
                try {
                    Uuid u = p.clientInstanceId(Duration.ofMillis(500));
                    instance = "client instance id " + u;
                } catch (Exception e) {
                    instance = "no client instance id (" + describe(e) + ")";
                }
            }
        }
        check(ms[1] < 2000, "KafkaProducer construction to first acknowledged send took " + ms[1] + " ms, want under 2000");
        check(ms[0] < 5000, "the JVM's first KafkaProducer took " + ms[0] + " ms from construction to its first acknowledged send, want under 5000");
        long cstart = System.nanoTime();
        List<ConsumerRecord<byte[], byte[]>> got = readAll(env.bootstrap(), t, 1, 1, Map.of(), 10000);
        long cms = (System.nanoTime() - cstart) / 1_000_000;
        check("first-0".equals(str(got.get(0).value())), "read back " + str(got.get(0).value()));
        // The JVM's first consumer: its classes load on the way.
        check(cms < 5000, "KafkaConsumer construction to first record took " + cms + " ms, want under 5000");
        return "first send acknowledged " + ms[1] + " ms after KafkaProducer construction (" + ms[0]
                + " ms for the JVM's first producer); first record polled " + cms + " ms after KafkaConsumer construction; " + instance;
    }
}
