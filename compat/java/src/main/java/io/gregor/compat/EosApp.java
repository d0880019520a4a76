package io.gregor.compat;

import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.ConsumerConfig;
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
 * A Kafka Streams application with exactly-once (v2) processing, run as its
 * own process so that compat/streams_kill_test.go can SIGKILL it mid-stream
 * and start it again: each input record (key ignored, value "K:i") is
 * re-keyed by K, which goes through a repartition topic, and counted per
 * key in a state store with a compacted changelog; every new count goes to
 * the output topic. Read with read_committed, the output of each key is
 * then 1, 2, 3... with neither a gap nor a repeat, however often the app
 * died.
 *
 * <p>Usage: EosApp BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR
 * [GROUP_PROTOCOL]. GROUP_PROTOCOL is classic (the default) or streams
 * (KIP-1071: the broker assigns the tasks through StreamsGroupHeartbeat
 * and creates the internal topics). It prints "RUNNING" once its threads
 * run and runs until killed; it ends with code 0 on SIGTERM.
 */
public final class EosApp {
    private EosApp() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 5 && args.length != 6) {
            System.err.println("usage: EosApp BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR [GROUP_PROTOCOL]");
            System.exit(2);
        }
        String bootstrap = args[0], app = args[1], in = args[2], out = args[3], state = args[4];
        String protocol = args.length == 6 ? args[5] : "classic";
        StreamsBuilder b = new StreamsBuilder();
        b.stream(in, Consumed.with(Serdes.ByteArray(), Serdes.String()))
                .groupBy((k, v) -> v.substring(0, v.indexOf(':')), Grouped.with(Serdes.String(), Serdes.String()))
                .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts"))
                .toStream()
                .to(out, Produced.with(Serdes.String(), Serdes.Long()));
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, app);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.STATE_DIR_CONFIG, state);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "100");
        // Every update of a count is a record, so the output shows a
        // repeat or a gap if one happened.
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, "1");
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, protocol);
        if (protocol.equals("classic")) {
            // A killed instance's transactions are fenced by the restarted
            // one (same transactional id); its group member leaves by
            // timeout. The streams protocol takes the session timeout from
            // the broker's group config instead.
            p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), "10000");
        }
        KafkaStreams ks = new KafkaStreams(b.build(), p);
        CountDownLatch running = new CountDownLatch(1);
        ks.setStateListener((now, before) -> {
            System.out.println("STATE " + before + " -> " + now);
            if (now == KafkaStreams.State.RUNNING) {
                running.countDown();
            }
            if (now == KafkaStreams.State.ERROR) {
                System.out.println("FAILED");
                System.exit(1);
            }
        });
        ks.setUncaughtExceptionHandler(e -> {
            System.out.println("UNCAUGHT " + e);
            e.printStackTrace(System.out);
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> ks.close(Duration.ofSeconds(20))));
        ks.start();
        running.await();
        System.out.println("RUNNING");
        System.out.flush();
        Thread.currentThread().join();
    }
}
