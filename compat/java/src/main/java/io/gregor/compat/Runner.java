package io.gregor.compat;

import java.io.BufferedReader;
import java.io.FileOutputStream;
import java.io.FileDescriptor;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The compat suite's Java client runner: one JVM per gregor target runs
 * every scenario it is asked for, one at a time, so the JVM starts once.
 *
 * <p>Run as {@code Runner --bootstrap A --strict B}. Each line on stdin is
 * {@code scenario topic}; for each the runner prints one JSON line on
 * stdout, {"scenario", "status", "reason", "seconds"}, the format the
 * harness reads from its script clients. Everything else the JVM prints
 * (the clients' own output) goes to stderr, so stdout holds results only.
 * The runner exits at the end of stdin.
 */
public final class Runner {
    private Runner() {}

    /** A scenario: returns a note kept with a pass, or throws. */
    @FunctionalInterface
    interface Scenario {
        String run(Env env) throws Exception;
    }

    /** What a scenario gets: the two gregor targets and its topic. */
    record Env(String bootstrap, String strict, String topic) {}

    /** The scenario failed; the message is the reason. */
    static final class Fail extends Exception {
        private static final long serialVersionUID = 1L;

        Fail(String msg) {
            super(msg);
        }
    }

    /** The client itself lacks the feature the scenario needs. */
    static final class NotApplicable extends Exception {
        private static final long serialVersionUID = 1L;

        NotApplicable(String msg) {
            super(msg);
        }
    }

    static Map<String, Scenario> all() {
        Map<String, Scenario> m = new LinkedHashMap<>();
        Scenarios.register(m);
        Extras.register(m);
        Groups.register(m);
        Streams.register(m);
        return m;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = null, strict = null;
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--bootstrap" -> bootstrap = args[i + 1];
                case "--strict" -> strict = args[i + 1];
                default -> throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        if (bootstrap == null || strict == null) {
            throw new IllegalArgumentException("--bootstrap and --strict are required");
        }
        // Results own stdout: whatever a library prints goes to stderr.
        PrintStream results = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
        System.setOut(System.err);
        Map<String, Scenario> scenarios = all();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            line = line.trim();
            if (line.isEmpty()) {
                continue;
            }
            String[] f = line.split("\\s+");
            String id = f[0];
            String topic = f.length > 1 ? f[1] : "java-" + id.replace('.', '-').replace('_', '-');
            long start = System.nanoTime();
            String status = "pass", reason = "";
            System.err.println("=== scenario " + id + " topic " + topic);
            try {
                Scenario s = scenarios.get(id);
                if (s == null) {
                    throw new Fail("scenario not written for this client");
                }
                String note = s.run(new Env(bootstrap, strict, topic));
                reason = note == null ? "" : note;
            } catch (NotApplicable e) {
                status = "n/a";
                reason = e.getMessage();
            } catch (Fail e) {
                status = "fail";
                reason = e.getMessage();
            } catch (Throwable e) { // a client error is the scenario's failure
                e.printStackTrace(System.err);
                status = "fail";
                reason = Util.describe(e);
            }
            double secs = (System.nanoTime() - start) / 1e9;
            results.println("{\"scenario\":" + Util.json(id) + ",\"status\":" + Util.json(status)
                    + ",\"reason\":" + Util.json(reason) + ",\"seconds\":" + String.format("%.3f", secs) + "}");
        }
        System.exit(0);
    }
}
