package io.gregor.compat;

import static io.gregor.compat.Scenarios.rec;
import static io.gregor.compat.Util.*;

import io.gregor.compat.Runner.Env;
import io.gregor.compat.Runner.Scenario;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.stream.Stream;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * Kafka Streams (the same 4.4.0 release) on gregor: a word count whose
 * grouping goes through a repartition topic and whose counts live in a
 * changelog topic, both created by Streams itself, at least once and
 * exactly once (v2: transactions with consumer group metadata).
 */
final class Streams {
    private Streams() {}

    static void register(Map<String, Scenario> m) {
        m.put("streams.wordcount", env -> wordCount(env, StreamsConfig.AT_LEAST_ONCE, "classic"));
        m.put("streams.eos_v2", env -> wordCount(env, StreamsConfig.EXACTLY_ONCE_V2, "classic"));
        m.put("streams.protocol", env -> wordCount(env, StreamsConfig.AT_LEAST_ONCE, "streams"));
        m.put("share.consume", Streams::shareConsume);
    }

    static final String[] LINES = {
        "the quick brown fox", "jumps over the lazy dog", "the dog barks", "a fox runs", "the end",
    };

    /** The word count with guarantee, its group on protocol (classic, or KIP-1071's streams groups). */
    static String wordCount(Env env, String guarantee, String protocol) throws Exception {
        String t = env.topic(), in = t + "-in", out = t + "-out", app = t + "-app";
        createTopic(env.bootstrap(), in, 2, Map.of());
        createTopic(env.bootstrap(), out, 1, Map.of());
        Map<String, Long> want = new TreeMap<>();
        List<ProducerRecord<byte[], byte[]>> recs = new ArrayList<>();
        for (int i = 0; i < LINES.length * 4; i++) {
            String line = LINES[i % LINES.length];
            recs.add(rec(in, i % 2, null, line));
            for (String w : line.split(" ")) {
                want.merge(w, 1L, Long::sum);
            }
        }
        produce(env.bootstrap(), recs, Map.of());

        StreamsBuilder b = new StreamsBuilder();
        b.stream(in, Consumed.with(Serdes.ByteArray(), Serdes.String()))
                .flatMapValues(v -> Arrays.asList(v.split(" ")))
                .groupBy((k, w) -> w, Grouped.with(Serdes.String(), Serdes.String()))
                .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts"))
                .toStream()
                .to(out, Produced.with(Serdes.String(), Serdes.Long()));
        Path state = Files.createTempDirectory("gregor-compat-streams-");
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, app);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, env.bootstrap());
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, guarantee);
        p.put(StreamsConfig.STATE_DIR_CONFIG, state.toString());
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "200");
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, "1");
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, protocol);
        Map<String, Long> last = new TreeMap<>();
        List<String> failures = new java.util.concurrent.CopyOnWriteArrayList<>();
        try (KafkaStreams ks = new KafkaStreams(b.build(), p)) {
            ks.setUncaughtExceptionHandler(e -> {
                failures.add(describe(e));
                return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
            });
            ks.start();
            // Output read_committed under exactly once: only what the
            // transactions committed.
            Map<String, Object> cprops = Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
            try (var c = consumer(env.bootstrap(), cprops)) {
                var tp = new org.apache.kafka.common.TopicPartition(out, 0);
                c.assign(List.of(tp));
                c.seekToBeginning(List.of(tp));
                long deadline = System.currentTimeMillis() + 90000;
                while (!last.equals(want)) {
                    check(failures.isEmpty(), "the Streams app failed: " + failures);
                    check(System.currentTimeMillis() < deadline, "counts " + last + " after 90s (Streams " + ks.state() + "), want " + want);
                    for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                        long n = java.nio.ByteBuffer.wrap(r.value()).getLong();
                        Long prev = last.put(str(r.key()), n);
                        check(prev == null || n > prev, "count of " + str(r.key()) + " went from " + prev + " to " + n);
                    }
                }
            }
            ks.close(Duration.ofSeconds(20));
        } finally {
            try (Stream<Path> walk = Files.walk(state)) {
                walk.sorted(Comparator.reverseOrder()).forEach(x -> x.toFile().delete());
            }
        }
        // Streams created its internal topics on gregor: a repartition
        // topic for the grouping and a compacted changelog for the store.
        try (Admin a = admin(env.bootstrap())) {
            Set<String> names = a.listTopics().names().get();
            String repart = app + "-counts-repartition", changelog = app + "-counts-changelog";
            check(names.contains(repart) && names.contains(changelog), "internal topics: " + names.stream().filter(n -> n.startsWith(app)).toList()
                    + ", want " + repart + " and " + changelog);
            var cfg = Scenarios.describeConfigs(a, new org.apache.kafka.common.config.ConfigResource(
                    org.apache.kafka.common.config.ConfigResource.Type.TOPIC, changelog));
            check("compact".equals(cfg.get("cleanup.policy").value()), "changelog cleanup.policy " + cfg.get("cleanup.policy").value());
            var offs = a.listConsumerGroupOffsets(app).partitionsToOffsetAndMetadata().get();
            Map<Integer, Long> inOffs = new HashMap<>();
            offs.forEach((tp, o) -> {
                if (tp.topic().equals(in)) {
                    inOffs.put(tp.partition(), o.offset());
                }
            });
            check(inOffs.equals(Map.of(0, (long) LINES.length * 2, 1, (long) LINES.length * 2)),
                    "the app's committed input offsets " + inOffs + ", want " + LINES.length * 2 + " on both partitions");
        }
        return want.size() + " words counted";
    }

    /**
     * A share group (KIP-932) through KafkaShareConsumer: with the group's
     * share.auto.offset.reset set to earliest, one member reads every
     * record once, acknowledges and commits them; Admin lists and
     * describes the group.
     */
    static String shareConsume(Env env) throws Exception {
        String t = env.topic(), group = t + "-share";
        createTopic(env.bootstrap(), t, 2, Map.of());
        List<ProducerRecord<byte[], byte[]>> recs = new ArrayList<>();
        for (int i = 0; i < 20; i++) {
            recs.add(rec(t, i % 2, null, String.valueOf(i)));
        }
        produce(env.bootstrap(), recs, Map.of());
        try (Admin a = admin(env.bootstrap())) {
            var res = new org.apache.kafka.common.config.ConfigResource(org.apache.kafka.common.config.ConfigResource.Type.GROUP, group);
            a.incrementalAlterConfigs(Map.of(res, List.of(new org.apache.kafka.clients.admin.AlterConfigOp(
                    new org.apache.kafka.clients.admin.ConfigEntry("share.auto.offset.reset", "earliest"),
                    org.apache.kafka.clients.admin.AlterConfigOp.OpType.SET)))).all().get();
            Properties p = common(env.bootstrap());
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, org.apache.kafka.common.serialization.ByteArrayDeserializer.class.getName());
            p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, org.apache.kafka.common.serialization.ByteArrayDeserializer.class.getName());
            p.put("share.acknowledgement.mode", "explicit");
            Map<String, Integer> seen = new TreeMap<>();
            try (var c = new org.apache.kafka.clients.consumer.KafkaShareConsumer<byte[], byte[]>(p)) {
                c.subscribe(List.of(t));
                long deadline = System.currentTimeMillis() + 60000;
                while (seen.size() < 20) {
                    check(System.currentTimeMillis() < deadline, "the share consumer read " + seen.size() + " of 20 records in 60s");
                    for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                        seen.merge(str(r.value()), 1, Integer::sum);
                        c.acknowledge(r, org.apache.kafka.clients.consumer.AcknowledgeType.ACCEPT);
                    }
                    for (var e : c.commitSync().entrySet()) {
                        if (e.getValue().isPresent()) {
                            throw new Runner.Fail("acknowledging " + e.getKey() + ": " + describe(e.getValue().get()));
                        }
                    }
                }
                for (var e : seen.entrySet()) {
                    check(e.getValue() == 1, "record " + e.getKey() + " delivered " + e.getValue() + " times");
                }
                var d = a.describeShareGroups(List.of(group)).describedGroups().get(group).get();
                check(d.groupState() == org.apache.kafka.common.GroupState.STABLE && d.members().size() == 1,
                        "share group described as " + d.groupState() + " with " + d.members().size() + " members");
                check(a.listGroups(org.apache.kafka.clients.admin.ListGroupsOptions.forShareGroups()).all().get().stream()
                        .anyMatch(g -> g.groupId().equals(group)), "listGroups for share groups misses " + group);
            }
        }
        return "";
    }
}
