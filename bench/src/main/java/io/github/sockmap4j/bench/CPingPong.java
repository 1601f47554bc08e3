package io.github.sockmap4j.bench;

import io.github.sockmap4j.OptIn;
import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapStats;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The C reference of {@link PingPong} ({@code src/main/c/pingpong.c}, built by this module into
 * {@code target/c/pingpong}): the same round trips by a C client and echo thread in a child
 * process, over TCP or over this project's redirect (the port opted in through the same
 * {@link Sockmap}, the child in this process's cgroup). It publishes nothing about its reads, so
 * its receivers are bounded as any such receiver is.
 */
final class CPingPong {
    /** One run: latencies and CPU per round trip in nanoseconds, and what the kernel carried. */
    record Result(long p50, long p99, long p999, double cpuNanosPerOp, long redirected, long passed) {
        boolean accelerated() {
            return redirected > 0 && passed == 0;
        }
    }

    private CPingPong() {
    }

    /** The program, or why it cannot run. */
    static Path binary() {
        return Path.of(System.getProperty("sockmap4j.bench.c", "target/c/pingpong"));
    }

    static String unavailable() {
        Path b = binary();
        return Files.isExecutable(b) ? null
                : b.toAbsolutePath() + " is missing: build it with 'mvn -pl bench package' (needs cc)";
    }

    static Result run(Sockmap sockmap, boolean redirect, PingPong.Wait wait, PingPong.Placement placement, int size,
                      int warmup, int iterations) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(List.of(binary().toString(), Integer.toString(size), Integer.toString(warmup),
                Integer.toString(iterations), wait != PingPong.Wait.BUSY_POLL ? "0" : System.getProperty("sockmap4j.bench.cspin", "1"),
                Integer.toString(placement.clientCpu), Integer.toString(placement.echoCpu)))
                .redirectError(ProcessBuilder.Redirect.INHERIT).start();
        try (BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.US_ASCII));
             OutputStream in = p.getOutputStream()) {
            Map<String, String> port = fields(out.readLine(), p);
            OptIn optIn = redirect ? sockmap.optIn(Integer.parseInt(port.get("port"))) : null;
            try {
                SockmapStats before = sockmap.stats();
                in.write('\n');
                in.flush();
                Map<String, String> r = fields(out.readLine(), p);
                if (!p.waitFor(30, TimeUnit.SECONDS) || p.exitValue() != 0) {
                    throw new IOException("the C ping-pong did not end well: " + p.exitValue());
                }
                SockmapStats after = sockmap.stats();
                return new Result(Long.parseLong(r.get("p50")), Long.parseLong(r.get("p99")), Long.parseLong(r.get("p999")),
                        Double.parseDouble(r.get("cpu")), after.messagesRedirected() - before.messagesRedirected(),
                        after.messagesPassed() - before.messagesPassed());
            } finally {
                if (optIn != null) {
                    optIn.close();
                }
            }
        } finally {
            p.destroyForcibly();
        }
    }

    /** "a=1 b=2" into a map; a missing line means the program failed (its stderr says why). */
    private static Map<String, String> fields(String line, Process p) throws IOException {
        if (line == null) {
            throw new IOException("the C ping-pong " + binary() + " failed (exit "
                    + (p.isAlive() ? "pending" : Integer.toString(p.exitValue())) + "); its stderr is above");
        }
        Map<String, String> m = new HashMap<>();
        for (String kv : line.trim().split("\\s+")) {
            int eq = kv.indexOf('=');
            m.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
        return m;
    }
}
