package io.gregor.compat;

import static io.gregor.compat.Util.*;

import io.gregor.compat.Runner.Env;
import io.gregor.compat.Runner.Fail;
import io.gregor.compat.Runner.Scenario;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.header.Header;

/** The harness's scenarios (compat/harness/scenarios.go) through kafka-clients. */
final class Scenarios {
    private Scenarios() {}

    static void register(Map<String, Scenario> m) {
        m.put("metadata", Scenarios::metadata);
        m.put("topics.admin", Scenarios::topicsAdmin);
        for (String codec : List.of("none", "gzip", "snappy", "lz4", "zstd")) {
            m.put("produce." + codec, env -> produceCodec(env, codec));
        }
        m.put("order.key", Scenarios::orderKey);
        m.put("group.resume", env -> groupResume(env, "classic"));
        m.put("group.split", env -> groupSplit(env, "classic"));
        m.put("producer.idempotent", Scenarios::idempotent);
        m.put("txn.read_committed", Scenarios::txnReadCommitted);
        m.put("listoffsets.time", Scenarios::listOffsetsTime);
        m.put("configs.describe", Scenarios::configsDescribe);
        m.put("configs.alter", Scenarios::configsAlter);
        m.put("deleterecords", Scenarios::deleteRecords);
        m.put("record.1mib", Scenarios::bigRecord);
        m.put("bulk.100k", Scenarios::bulk);
        m.put("edge.unknown_topic", Scenarios::unknownTopic);
        m.put("edge.too_large", Scenarios::tooLarge);
        m.put("edge.offset_past_end", Scenarios::offsetPastEnd);
        m.put("edge.topic_deleted", Scenarios::topicDeleted);
    }

    static ProducerRecord<byte[], byte[]> rec(String topic, Integer partition, String key, String value) {
        return new ProducerRecord<>(topic, partition, key == null ? null : bytes(key), bytes(value));
    }

    static List<ProducerRecord<byte[], byte[]>> numbered(String topic, int n) {
        List<ProducerRecord<byte[], byte[]>> out = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            out.add(rec(topic, 0, null, String.valueOf(i)));
        }
        return out;
    }

    static TopicDescription describeTopic(Admin a, String topic) throws Exception {
        return a.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
    }

    static String metadata(Env env) throws Exception {
        // The producer's metadata request may create the topic (auto-create on).
        produce(env.bootstrap(), List.of(rec(env.topic(), null, null, "v")), Map.of());
        try (Admin a = admin(env.bootstrap())) {
            DescribeClusterResult c = a.describeCluster();
            Collection<Node> nodes = c.nodes().get();
            List<String> got = new ArrayList<>();
            for (Node n : nodes) {
                got.add(n.id() + "@" + n.host() + ":" + n.port());
            }
            check(got.equals(List.of("1@" + env.bootstrap())), "brokers " + got + ", want node 1 at " + env.bootstrap());
            TopicDescription d = describeTopic(a, env.topic());
            List<TopicPartitionInfo> ps = d.partitions();
            check(ps.size() == 1 && ps.get(0).leader() != null && ps.get(0).leader().id() == 1,
                    "topic " + env.topic() + ": " + ps + ", want one partition led by node 1");
            return "cluster " + c.clusterId().get() + ", controller " + c.controller().get().id();
        }
    }

    static String topicsAdmin(Env env) throws Exception {
        String t = env.topic();
        try (Admin a = admin(env.bootstrap())) {
            a.createTopics(List.of(new NewTopic(t, 3, (short) 1))).all().get();
            waitForChecked("partitions after create", 10000, () -> {
                int n = describeTopic(a, t).partitions().size();
                return n == 3 ? null : n + " partitions, want 3";
            });
            a.createPartitions(Map.of(t, NewPartitions.increaseTo(5))).all().get();
            waitForChecked("partitions after CreatePartitions", 10000, () -> {
                int n = describeTopic(a, t).partitions().size();
                return n == 5 ? null : n + " partitions, want 5";
            });
            a.deleteTopics(List.of(t)).all().get();
            waitForChecked("topic listed after DeleteTopics", 15000, () -> a.listTopics().names().get().contains(t) ? "listed" : null);
            expectThrows("describe a deleted topic", UnknownTopicOrPartitionException.class, () -> describeTopic(a, t));
        }
        return "";
    }

    static String produceCodec(Env env, String codec) throws Exception {
        String t = env.topic();
        createTopic(env.bootstrap(), t, 1, Map.of());
        List<ProducerRecord<byte[], byte[]>> recs = new ArrayList<>();
        for (int i = 0; i < PRODUCE_COUNT; i++) {
            ProducerRecord<byte[], byte[]> r = rec(t, 0, produceKey(i), produceValue(i));
            r.headers().add("i", bytes(String.valueOf(i)));
            recs.add(r);
        }
        List<RecordMetadata> md = produce(env.bootstrap(), recs, Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec));
        for (int i = 0; i < md.size(); i++) {
            check(md.get(i).offset() == i, "record " + i + " acknowledged at offset " + md.get(i).offset());
        }
        List<ConsumerRecord<byte[], byte[]>> got = readAll(env.bootstrap(), t, 1, PRODUCE_COUNT, Map.of(), 60000);
        for (int i = 0; i < got.size(); i++) {
            ConsumerRecord<byte[], byte[]> r = got.get(i);
            Header[] hs = r.headers().toArray();
            boolean ok = r.offset() == i && produceKey(i).equals(str(r.key())) && produceValue(i).equals(str(r.value()))
                    && hs.length == 1 && hs[0].key().equals("i") && String.valueOf(i).equals(str(hs[0].value()));
            check(ok, "record " + i + ": offset " + r.offset() + " key " + str(r.key()) + " value " + str(r.value())
                    + " headers " + r.headers());
        }
        check(got.size() == PRODUCE_COUNT, "read " + got.size() + " records, want " + PRODUCE_COUNT);
        return "";
    }

    static String orderKey(Env env) throws Exception {
        String t = env.topic();
        createTopic(env.bootstrap(), t, 4, Map.of());
        Map<String, Integer> seq = new HashMap<>();
        List<ProducerRecord<byte[], byte[]>> recs = new ArrayList<>();
        for (int i = 0; i < ORDER_COUNT; i++) {
            String k = produceKey(i % ORDER_KEYS);
            int n = seq.merge(k, 1, Integer::sum) - 1;
            recs.add(rec(t, null, k, String.valueOf(n)));
        }
        produce(env.bootstrap(), recs, Map.of());
        List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>(readAll(env.bootstrap(), t, 4, ORDER_COUNT, Map.of(), 60000));
        got.sort(Comparator.comparingInt((ConsumerRecord<byte[], byte[]> r) -> r.partition()).thenComparingLong(ConsumerRecord::offset));
        Map<String, Integer> part = new HashMap<>(), next = new HashMap<>();
        for (ConsumerRecord<byte[], byte[]> r : got) {
            String k = str(r.key());
            Integer p = part.putIfAbsent(k, r.partition());
            check(p == null || p == r.partition(), "key " + k + " in partitions " + p + " and " + r.partition());
            int want = next.getOrDefault(k, 0);
            check(String.valueOf(want).equals(str(r.value())), "key " + k + ": value " + str(r.value()) + ", want " + want);
            next.put(k, want + 1);
        }
        check(got.size() == ORDER_COUNT && part.size() == ORDER_KEYS,
                "read " + got.size() + " records over " + part.size() + " keys, want " + ORDER_COUNT + " over " + ORDER_KEYS);
        return "";
    }

    /** Group settings for protocol: classic takes session and heartbeat times; consumer (KIP-848) refuses them. */
    static Map<String, Object> groupProps(String group, String protocol, int sessionMs) {
        Map<String, Object> p = new HashMap<>();
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        if (protocol.equals("classic")) {
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, String.valueOf(sessionMs));
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
        }
        return p;
    }

    static String groupResume(Env env, String protocol) throws Exception {
        String t = env.topic();
        createTopic(env.bootstrap(), t, 2, Map.of());
        int n = 100;
        List<ProducerRecord<byte[], byte[]>> recs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            recs.add(rec(t, i % 2, null, String.valueOf(i)));
        }
        produce(env.bootstrap(), recs, Map.of());
        Map<String, Integer> seen = new HashMap<>();
        String group = t + "-group";
        for (int member = 0; member < 2; member++) {
            int read = 0;
            try (KafkaConsumer<byte[], byte[]> c = consumer(env.bootstrap(), groupProps(group, protocol, 10000))) {
                c.subscribe(List.of(t));
                long deadline = System.currentTimeMillis() + 40000;
                while (read < n / 2) {
                    check(System.currentTimeMillis() < deadline, "group member " + member + " read " + read + " of " + n / 2);
                    for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                        if (read >= n / 2) {
                            break; // not processed: not committed
                        }
                        seen.merge(str(r.value()), 1, Integer::sum);
                        read++;
                        c.commitSync(Map.of(new TopicPartition(t, r.partition()), new OffsetAndMetadata(r.offset() + 1)));
                    }
                }
            } // close leaves the group
        }
        for (int i = 0; i < n; i++) {
            int got = seen.getOrDefault(String.valueOf(i), 0);
            check(got == 1, "record " + i + " read " + got + " times across the two members");
        }
        return "";
    }

    /** One group.split member's assignment as its rebalance listener reports it. */
    static final class SplitAssign {
        final List<Set<Integer>> parts = List.of(new TreeSet<>(), new TreeSet<>());
        int changes;

        synchronized void add(int m, Collection<TopicPartition> tps) {
            for (TopicPartition tp : tps) {
                if (parts.get(m).add(tp.partition())) {
                    changes++;
                }
            }
        }

        synchronized void remove(int m, Collection<TopicPartition> tps) {
            for (TopicPartition tp : tps) {
                if (parts.get(m).remove(tp.partition())) {
                    changes++;
                }
            }
        }

        synchronized List<List<Integer>> snapshot() {
            return List.of(new ArrayList<>(parts.get(0)), new ArrayList<>(parts.get(1)));
        }

        synchronized int changes() {
            return changes;
        }
    }

    /** Why two members' assignments are not yet a split of the topic, or null. */
    static String validSplit(List<List<Integer>> sets) {
        Map<Integer, Integer> owner = new HashMap<>();
        for (int m = 0; m < 2; m++) {
            if (sets.get(m).isEmpty()) {
                return "member " + m + " has no partitions (assignments " + sets + ")";
            }
            for (int p : sets.get(m)) {
                Integer o = owner.put(p, m);
                if (o != null) {
                    return "partition " + p + " assigned to members " + o + " and " + m + " (assignments " + sets + ")";
                }
            }
        }
        for (int p = 0; p < SPLIT_PARTITIONS; p++) {
            if (!owner.containsKey(p)) {
                return "partition " + p + " assigned to neither member (assignments " + sets + ")";
            }
        }
        return null;
    }

    /**
     * Two KafkaConsumers of one group, one thread each (a consumer is not
     * thread-safe), with the client's default assignor for protocol.
     */
    static String groupSplit(Env env, String protocol) throws Exception {
        String t = env.topic();
        createTopic(env.bootstrap(), t, SPLIT_PARTITIONS, Map.of());
        String group = t + "-group";
        SplitAssign assign = new SplitAssign();
        AtomicBoolean stop = new AtomicBoolean();
        List<String> errors = new CopyOnWriteArrayList<>();
        Map<String, Integer> seen = new HashMap<>();
        List<Map<Integer, Integer>> read = List.of(new HashMap<>(), new HashMap<>());
        AtomicInteger committed = new AtomicInteger();
        List<Thread> threads = new ArrayList<>();
        for (int m = 0; m < 2; m++) {
            final int member = m;
            Thread th = new Thread(() -> {
                Map<String, Object> props = groupProps(group, protocol, SPLIT_SESSION_MS);
                props.put(ConsumerConfig.CLIENT_ID_CONFIG, group + "-" + member);
                try (KafkaConsumer<byte[], byte[]> c = consumer(env.bootstrap(), props)) {
                    c.subscribe(List.of(t), new ConsumerRebalanceListener() {
                        @Override
                        public void onPartitionsRevoked(Collection<TopicPartition> ps) {
                            assign.remove(member, ps);
                        }

                        @Override
                        public void onPartitionsAssigned(Collection<TopicPartition> ps) {
                            assign.add(member, ps);
                        }

                        @Override
                        public void onPartitionsLost(Collection<TopicPartition> ps) {
                            assign.remove(member, ps);
                        }
                    });
                    while (!stop.get()) {
                        for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100))) {
                            synchronized (seen) {
                                seen.merge(str(r.value()), 1, Integer::sum);
                                read.get(member).merge(r.partition(), 1, Integer::sum);
                            }
                            c.commitSync(Map.of(new TopicPartition(t, r.partition()), new OffsetAndMetadata(r.offset() + 1)));
                            committed.incrementAndGet();
                        }
                    }
                } catch (Exception e) {
                    e.printStackTrace(System.err);
                    errors.add("member " + member + ": " + describe(e));
                }
            }, "split-" + m);
            threads.add(th);
            th.start();
        }
        List<List<Integer>> sets;
        try {
            waitFor("wait for both members to hold a part of the topic", 45000,
                    () -> errors.isEmpty() ? validSplit(assign.snapshot()) : errors.get(0));
            sets = assign.snapshot();
            int before = assign.changes();
            List<ProducerRecord<byte[], byte[]>> recs = new ArrayList<>();
            for (int i = 0; i < SPLIT_COUNT; i++) {
                recs.add(rec(t, i % SPLIT_PARTITIONS, null, String.valueOf(i)));
            }
            produce(env.bootstrap(), recs, Map.of());
            waitFor("wait for every record to be processed and committed", 45000, () -> !errors.isEmpty() ? errors.get(0)
                    : committed.get() >= SPLIT_COUNT ? null : committed.get() + " of " + SPLIT_COUNT + " processed and committed");
            check(assign.changes() == before, "the group rebalanced while consuming: assignments " + sets
                    + " when the records were written, " + assign.snapshot() + " at the end (" + (assign.changes() - before) + " changes)");
        } finally {
            stop.set(true);
            for (Thread th : threads) {
                th.join(20000);
            }
        }
        check(errors.isEmpty(), String.join("; ", errors));
        List<String> note = new ArrayList<>();
        synchronized (seen) {
            for (int m = 0; m < 2; m++) {
                Map<Integer, Integer> mine = read.get(m);
                check(!mine.isEmpty(), "member " + m + " read nothing (assigned " + sets.get(m) + ")");
                for (Map.Entry<Integer, Integer> e : mine.entrySet()) {
                    check(sets.get(m).contains(e.getKey()), "member " + m + " read " + e.getValue() + " records of partition "
                            + e.getKey() + ", outside its assignment " + sets.get(m));
                    check(!read.get(1 - m).containsKey(e.getKey()), "partition " + e.getKey() + " read by both members without a rebalance");
                }
                note.add("member " + m + " read partitions " + new TreeSet<>(mine.keySet()));
            }
            for (int i = 0; i < SPLIT_COUNT; i++) {
                int n = seen.getOrDefault(String.valueOf(i), 0);
                check(n == 1, "record " + i + " read " + n + " times across the two members");
            }
            check(seen.size() == SPLIT_COUNT, "read " + seen.size() + " distinct values, want " + SPLIT_COUNT);
        }
        return String.join("; ", note);
    }

    static String idempotent(Env env) throws Exception {
        String t = env.topic();
        createTopic(env.bootstrap(), t, 1, Map.of());
        List<ProducerRecord<byte[], byte[]>> recs = new ArrayList<>();
        for (int i = 0; i < PRODUCE_COUNT; i++) {
            recs.add(rec(t, null, null, String.valueOf(i)));
        }
        produce(env.bootstrap(), recs, Map.of(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true",
                "max.in.flight.requests.per.connection", "5", ProducerConfig.LINGER_MS_CONFIG, "0"));
        List<ConsumerRecord<byte[], byte[]>> got = readAll(env.bootstrap(), t, 1, PRODUCE_COUNT, Map.of(), 60000);
        for (int i = 0; i < got.size(); i++) {
            check(String.valueOf(i).equals(str(got.get(i).value())), "offset " + i + " holds " + str(got.get(i).value()));
        }
        return "";
    }

    static List<String> committedValues() {
        List<String> out = new ArrayList<>();
        for (int t : new int[] {0, 2}) {
            for (int i = 0; i < 10; i++) {
                out.add("t" + t + "-" + i);
            }
        }
        return out;
    }

    /** Committed, aborted, committed: returns the producer's note. */
    static String runTransactions(Env env, String txnId) throws Exception {
        try (KafkaProducer<byte[], byte[]> p = producer(env.bootstrap(), Map.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId))) {
            p.initTransactions();
            for (int t = 0; t < 3; t++) {
                p.beginTransaction();
                List<ProducerRecord<byte[], byte[]>> recs = new ArrayList<>();
                for (int i = 0; i < 10; i++) {
                    recs.add(rec(env.topic(), 0, null, "t" + t + "-" + i));
                }
                sendAll(p, recs);
                if (t == 1) {
                    p.abortTransaction();
                } else {
                    p.commitTransaction();
                }
            }
        }
        return "";
    }

    static List<String> readCommitted(Env env, int want) throws Exception {
        return readCommittedFrom(env.bootstrap(), env.topic(), want);
    }

    /** Partition 0 of topic read_committed: want values, and any more that come within a second. */
    static List<String> readCommittedFrom(String bootstrap, String topic, int want) throws Exception {
        List<String> values = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap, Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"))) {
            TopicPartition tp = new TopicPartition(topic, 0);
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            long deadline = System.currentTimeMillis() + 30000;
            // Read what is wanted, then a second more for anything extra.
            long quietUntil = Long.MAX_VALUE;
            while (System.currentTimeMillis() < Math.min(deadline, quietUntil)) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    values.add(str(r.value()));
                }
                if (values.size() >= want && quietUntil == Long.MAX_VALUE) {
                    quietUntil = System.currentTimeMillis() + 1000;
                }
            }
        }
        return values;
    }

    static String txnReadCommitted(Env env) throws Exception {
        createTopic(env.bootstrap(), env.topic(), 1, Map.of());
        runTransactions(env, env.topic() + "-txn");
        List<String> want = committedValues();
        List<String> got = readCommitted(env, want.size());
        check(got.equals(want), "read_committed read " + got + ", want " + want);
        return "";
    }

    static Map<TopicPartition, ListOffsetsResultInfo> listOffsets(Admin a, TopicPartition tp, OffsetSpec spec) throws Exception {
        return a.listOffsets(Map.of(tp, spec)).all().get();
    }

    static long offsetOf(Admin a, TopicPartition tp, OffsetSpec spec) throws Exception {
        return listOffsets(a, tp, spec).get(tp).offset();
    }

    static String listOffsetsTime(Env env) throws Exception {
        String t = env.topic();
        createTopic(env.bootstrap(), t, 1, Map.of());
        List<ProducerRecord<byte[], byte[]>> recs = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            recs.add(new ProducerRecord<>(t, 0, TIME_BASE + i * 1000L, null, bytes(String.valueOf(i))));
        }
        produce(env.bootstrap(), recs, Map.of());
        TopicPartition tp = new TopicPartition(t, 0);
        try (Admin a = admin(env.bootstrap())) {
            long[][] cases = {{TIME_BASE + 3500, 4}, {TIME_BASE + 3000, 3}, {TIME_BASE - 1, 0}};
            for (long[] c : cases) {
                ListOffsetsResultInfo r = listOffsets(a, tp, OffsetSpec.forTimestamp(c[0])).get(tp);
                check(r.offset() == c[1] && r.timestamp() == TIME_BASE + c[1] * 1000,
                        "offset for timestamp " + c[0] + ": " + r.offset() + " at " + r.timestamp() + ", want " + c[1]);
            }
            long past = offsetOf(a, tp, OffsetSpec.forTimestamp(TIME_BASE + 60000));
            check(past == -1, "offset for a timestamp after every record: " + past + ", want -1 (none)");
            long earliest = offsetOf(a, tp, OffsetSpec.earliest()), latest = offsetOf(a, tp, OffsetSpec.latest());
            check(earliest == 0 && latest == 10, "earliest " + earliest + " latest " + latest + ", want 0 and 10");
        }
        return "";
    }

    static Map<String, ConfigEntry> describeConfigs(Admin a, ConfigResource res) throws Exception {
        Config c = a.describeConfigs(List.of(res)).all().get().get(res);
        Map<String, ConfigEntry> out = new HashMap<>();
        for (ConfigEntry e : c.entries()) {
            out.put(e.name(), e);
        }
        return out;
    }

    static String configsDescribe(Env env) throws Exception {
        String t = env.topic();
        createTopic(env.bootstrap(), t, 1, map("retention.ms", "123456789"));
        try (Admin a = admin(env.bootstrap())) {
            Map<String, ConfigEntry> got = describeConfigs(a, new ConfigResource(ConfigResource.Type.TOPIC, t));
            ConfigEntry ret = got.get("retention.ms"), cp = got.get("cleanup.policy");
            check(ret != null && "123456789".equals(ret.value()) && ret.source() == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG,
                    "retention.ms " + ret + ", want 123456789 from DYNAMIC_TOPIC_CONFIG");
            check(cp != null && "delete".equals(cp.value()) && cp.isDefault(), "cleanup.policy " + cp + ", want the default delete");
            return got.size() + " configs described";
        }
    }

    static String configsAlter(Env env) throws Exception {
        String t = env.topic();
        createTopic(env.bootstrap(), t, 1, Map.of());
        ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, t);
        try (Admin a = admin(env.bootstrap())) {
            a.incrementalAlterConfigs(Map.of(res, List.of(new AlterConfigOp(new ConfigEntry("retention.ms", "987654321"),
                    AlterConfigOp.OpType.SET)))).all().get();
            // Kafka answers once the controller has committed the change;
            // its brokers apply it from the metadata log a moment later.
            waitForChecked("retention.ms after IncrementalAlterConfigs", 10000, () -> {
                ConfigEntry e = describeConfigs(a, res).get("retention.ms");
                return e != null && "987654321".equals(e.value()) ? null : "retention.ms " + e + ", want 987654321";
            });
        }
        return "";
    }

    static String deleteRecords(Env env) throws Exception {
        String t = env.topic();
        createTopic(env.bootstrap(), t, 1, Map.of());
        produce(env.bootstrap(), numbered(t, 10), Map.of());
        TopicPartition tp = new TopicPartition(t, 0);
        try (Admin a = admin(env.bootstrap())) {
            long low = a.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(4))).lowWatermarks().get(tp).get().lowWatermark();
            check(low == 4, "DeleteRecords to 4 answered low watermark " + low);
            long earliest = offsetOf(a, tp, OffsetSpec.earliest());
            check(earliest == 4, "log start offset " + earliest + " after DeleteRecords to 4");
        }
        List<ConsumerRecord<byte[], byte[]>> got = readAll(env.bootstrap(), t, 1, 6, Map.of(), 30000);
        check(got.get(0).offset() == 4 && "4".equals(str(got.get(0).value())),
                "first record from the beginning at " + got.get(0).offset() + ", want 4");
        return "";
    }

    static String bigRecord(Env env) throws Exception {
        String t = env.topic();
        createTopic(env.bootstrap(), t, 1, map("max.message.bytes", String.valueOf(BIG_TOPIC_MAX)));
        byte[] big = bigValue();
        produce(env.bootstrap(), List.of(new ProducerRecord<>(t, 0, bytes("big"), big)),
                Map.of(ProducerConfig.MAX_REQUEST_SIZE_CONFIG, String.valueOf(BIG_TOPIC_MAX)));
        List<ConsumerRecord<byte[], byte[]>> got = readAll(env.bootstrap(), t, 1, 1, Map.of(), 30000);
        byte[] v = got.get(0).value();
        check(sha256(v).equals(sha256(big)), "read back " + v.length + " bytes with another hash");
        return "";
    }

    static String bulk(Env env) throws Exception {
        String t = env.topic();
        createTopic(env.bootstrap(), t, 3, Map.of());
        List<ProducerRecord<byte[], byte[]>> recs = new ArrayList<>(BULK_COUNT);
        List<byte[]> values = new ArrayList<>(BULK_COUNT);
        for (int i = 0; i < BULK_COUNT; i++) {
            byte[] v = bytes(bulkValue(i));
            values.add(v);
            recs.add(new ProducerRecord<>(t, v));
        }
        long start = System.nanoTime();
        produce(env.bootstrap(), recs, Map.of());
        double produced = (System.nanoTime() - start) / 1e9;
        List<ConsumerRecord<byte[], byte[]>> got = readAll(env.bootstrap(), t, 3, BULK_COUNT, Map.of(), 180000);
        List<byte[]> gotValues = new ArrayList<>(got.size());
        for (ConsumerRecord<byte[], byte[]> r : got) {
            gotValues.add(r.value());
        }
        long want = bulkSum(values), sum = bulkSum(gotValues);
        check(got.size() == BULK_COUNT && sum == want,
                "read " + got.size() + " records with checksum " + sum + ", want " + BULK_COUNT + " with " + want);
        return String.format("checksum %d; produced in %.1fs", want, produced);
    }

    static String unknownTopic(Env env) throws Exception {
        // The Java producer waits for metadata that never lists the topic:
        // its documented outcome is a TimeoutException after max.block.ms,
        // with UNKNOWN_TOPIC_OR_PARTITION only in its log. The broker's
        // answer is checked with Admin, which surfaces the error itself.
        TimeoutException te = expectThrows("produce to an unknown topic with auto-create off", TimeoutException.class,
                () -> produce(env.strict(), List.of(rec(env.topic(), null, null, "v")), Map.of(ProducerConfig.MAX_BLOCK_MS_CONFIG, "5000")));
        check(String.valueOf(te.getMessage()).contains("not present in metadata"), "producer timed out with " + te.getMessage());
        try (Admin a = admin(env.strict())) {
            expectThrows("describe the unknown topic", UnknownTopicOrPartitionException.class, () -> describeTopic(a, env.topic()));
        }
        return "producer: " + te.getMessage() + "; Admin describeTopics: UNKNOWN_TOPIC_OR_PARTITION";
    }

    static String tooLarge(Env env) throws Exception {
        String t = env.topic();
        createTopic(env.bootstrap(), t, 1, map("max.message.bytes", String.valueOf(SMALL_TOPIC_MAX)));
        byte[] v = java.util.Arrays.copyOf(bigValue(), TOO_LARGE_VALUE);
        RecordTooLargeException e = expectThrows("produce " + TOO_LARGE_VALUE + " bytes to max.message.bytes=" + SMALL_TOPIC_MAX,
                RecordTooLargeException.class, () -> produce(env.bootstrap(), List.of(new ProducerRecord<>(t, 0, null, v)), Map.of()));
        return "RecordTooLargeException: " + e.getMessage();
    }

    static String offsetPastEnd(Env env) throws Exception {
        String t = env.topic();
        createTopic(env.bootstrap(), t, 1, Map.of());
        produce(env.bootstrap(), numbered(t, 10), Map.of());
        TopicPartition tp = new TopicPartition(t, 0);
        // Reset policy none: the client surfaces OFFSET_OUT_OF_RANGE.
        try (KafkaConsumer<byte[], byte[]> c = consumer(env.bootstrap(), Map.of(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none"))) {
            c.assign(List.of(tp));
            c.seek(tp, 100);
            OffsetOutOfRangeException e = expectThrows("poll at offset 100 of 10 with auto.offset.reset=none",
                    OffsetOutOfRangeException.class, () -> {
                        long deadline = System.currentTimeMillis() + 15000;
                        while (System.currentTimeMillis() < deadline) {
                            if (!c.poll(Duration.ofMillis(200)).isEmpty()) {
                                throw new Fail("read records at offset 100 of a 10-record partition");
                            }
                        }
                    });
            check(Long.valueOf(100).equals(e.offsetOutOfRangePartitions().get(tp)), "out of range: " + e.offsetOutOfRangePartitions());
        }
        // Reset policy earliest: back to 0.
        try (KafkaConsumer<byte[], byte[]> c = consumer(env.bootstrap(), Map.of())) {
            c.assign(List.of(tp));
            c.seek(tp, 100);
            List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 15000;
            while (got.size() < 10 && System.currentTimeMillis() < deadline) {
                c.poll(Duration.ofMillis(200)).forEach(got::add);
            }
            check(got.size() == 10 && got.get(0).offset() == 0, "after reset to earliest read " + got.size()
                    + " records from " + (got.isEmpty() ? "nowhere" : got.get(0).offset()));
        }
        return "OffsetOutOfRangeException at 100 with reset none; reset to earliest (0)";
    }

    static String topicDeleted(Env env) throws Exception {
        String t = env.topic();
        createTopic(env.bootstrap(), t, 1, Map.of());
        produce(env.bootstrap(), numbered(t, 10), Map.of());
        int read = 0;
        List<String> seen = new ArrayList<>();
        KafkaConsumer<byte[], byte[]> c = consumer(env.bootstrap(), groupProps(t + "-group", "classic", 10000));
        try {
            c.subscribe(List.of(t));
            long deadline = System.currentTimeMillis() + 30000;
            while (read < 10) {
                check(System.currentTimeMillis() < deadline, "read " + read + " of 10 before the delete");
                read += c.poll(Duration.ofMillis(200)).count();
            }
            c.commitSync();
            try (Admin a = admin(env.bootstrap())) {
                a.deleteTopics(List.of(t)).all().get();
            }
            long until = System.currentTimeMillis() + 10000;
            int after = 0;
            while (System.currentTimeMillis() < until) {
                try {
                    after += c.poll(Duration.ofMillis(200)).count();
                } catch (Exception e) {
                    String d = describe(e);
                    if (!seen.contains(d)) {
                        seen.add(d);
                    }
                }
            }
            check(after == 0, "read " + after + " records after the topic was deleted");
        } finally {
            long start = System.nanoTime();
            c.close(org.apache.kafka.clients.consumer.CloseOptions.timeout(Duration.ofSeconds(10)));
            double secs = (System.nanoTime() - start) / 1e9;
            check(secs < 12, String.format("the consumer took %.1fs to close after the topic was deleted", secs));
        }
        return seen.isEmpty() ? "consumer stayed silent (no records, no error) and closed" : "poll raised " + String.join("; ", seen);
    }
}
