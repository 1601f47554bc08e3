package io.github.sockmap4j.examples.rag;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import picocli.CommandLine;

/**
 * The demo itself, small, in its default topology (each stage in a pod of the node bed, every hop
 * through a Service VIP): four stage JVMs per path, both paths at once or one after the other, a
 * table for both paths, the internal hops redirected, and no stage or namespace left.
 */
@Tag("kernel")
class RagDemoTest {
    private static final String[] SMALL = {"--requests=300", "--rate=100", "--warmup=1", "--max-warmup=3",
        "--throughput-seconds=1", "--docs=1000", "--stage-heap=128m"};

    /**
     * The default: both paths' pipelines at once, the slices alternating ABBA, the plain path's
     * slices moving nothing through the redirect although the fast path's stages ran beside them,
     * and the tables whole.
     */
    @Test
    @Timeout(value = 300, unit = TimeUnit.SECONDS)
    void theDemoPrintsBothPathsAndTheKernelRanTheVerdict() {
        String text = run("--slices=2");
        Matcher slices = Pattern.compile("  (plain TCP|sockmap fast path) +slice ([0-9]) of 2: p50 [0-9.]+ ms").matcher(text);
        StringBuilder order = new StringBuilder();
        while (slices.find()) {
            order.append(slices.group(1).startsWith("plain") ? 'P' : 'F').append(slices.group(2));
        }
        assertEquals("P1F1F2P2", order.toString(), "ABBA, the plain path first in the first round: " + text);
        assertTrue(text.contains("fast/plain by slice pair, min / median / max: P50 "), text);
        assertTrue(text.contains("fast/plain by slice pair (2 pairs), min / lower quartile / median"), text);
        assertBothPathsMeasured(text);
    }

    @Test
    @Timeout(value = 240, unit = TimeUnit.SECONDS)
    void oneAfterTheOther() {
        String text = run("--no-paired");
        assertTrue(text.contains("each path's stages run on their own, one path after the other"), text);
        assertBothPathsMeasured(text);
    }

    /**
     * With no --rate, the load curve: each path's maximum measured, then both paths at each load
     * (a fraction of plain TCP's maximum), a table per load and the curve's table with both
     * paths and their ratio, the fast path redirected at every load and the plain path never.
     */
    @Test
    @Timeout(value = 300, unit = TimeUnit.SECONDS)
    void theLoadCurveMeasuresBothPathsAtEachLoad() {
        String text = runArgs("--loads=0.3,0.6", "--seconds-per-load=1", "--slices=2", "--warmup=1", "--max-warmup=3",
                "--throughput-seconds=1", "--docs=1000", "--stage-heap=128m");
        Matcher max = Pattern.compile("maximum throughput with 16 in flight: plain TCP ([0-9]+) rps, fast path ([0-9]+) rps")
                .matcher(text);
        assertTrue(max.find() && Long.parseLong(max.group(1)) > 0 && Long.parseLong(max.group(2)) > 0, text);
        for (String load : new String[] {"30", "60"}) {
            assertTrue(text.contains("## At " + load + "% of plain TCP's maximum throughput ("), "a table at " + load + "%");
            String num = "[0-9]+\\.[0-9]+";
            Matcher row = Pattern.compile("\\| " + load + "% of plain TCP's maximum \\| [0-9]+ \\| (" + num + ") / (" + num
                    + ") \\(" + num + "\\) \\| " + num + " / " + num + " \\(" + num + "\\) \\| " + num + " / " + num
                    + " \\(" + num + "\\) \\| " + num + " / " + num + " \\(" + num + "\\) \\| " + num + " / " + num
                    + " \\(" + num + "\\) \\| 0 / 0 \\|").matcher(text);
            assertTrue(row.find() && Double.parseDouble(row.group(1)) > 0 && Double.parseDouble(row.group(2)) > 0,
                    "the curve's row at " + load + "%, both paths, no request failed: " + text);
        }
        Matcher redirected = Pattern.compile("\\| MiB redirected \\(opted-in sockets\\) \\| 0.0 \\| ([0-9.]+) \\|")
                .matcher(text);
        int loads = 0;
        while (redirected.find()) {
            assertTrue(Double.parseDouble(redirected.group(1)) > 0, "the fast path redirected at every load: " + text);
            loads++;
        }
        assertEquals(2, loads, "a table per load: " + text);
        assertEquals(2, Pattern.compile("settling at the new load until the JIT compilers are quiet: \\S").matcher(text)
                .results().count(), "both pipelines run at each load before it is measured: " + text);
        assertEquals(0, ProcessHandle.current().children().count(), "every stage JVM has exited");
    }

    /**
     * Meshed: every pod with Istio's NAT and an HAProxy sidecar, the stages unchanged on both
     * paths; the fast path's connects, made with the pods meshed in the kernel, go straight to the
     * proxies and every leg of them is redirected, the plain path's register nothing; the sidecars'
     * CPU is counted, and no sidecar, stage or namespace is left.
     */
    @Test
    @Timeout(value = 300, unit = TimeUnit.SECONDS)
    void theMeshedPipelineRedirectsEveryLegOnTheFastPathAndNoneOnThePlain() {
        String text = run("--mesh", "--slices=2");
        assertTrue(text.contains("mesh: every pod with Istio's NAT and an HAProxy sidecar"), text);
        assertBothPathsMeasured(text);
        String share = "([0-9.]+) of ([0-9,]+) B \\(([0-9]+) sockets\\)";
        Matcher legs = Pattern.compile("\\| 1 \\| ([0-9]+) \\| ([0-9]+) \\| ([0-9]+) \\| " + share + " \\| " + share
                + " \\| " + share + " \\|").matcher(text);
        assertTrue(legs.find(), "the legs of the round, every socket closed: " + text);
        long captured = Long.parseLong(legs.group(1));
        assertTrue(captured >= 4, "the load's and the gateway's connects sent to their proxies: " + captured);
        assertEquals(captured, Long.parseLong(legs.group(2)), "each proxy's connect sent to its peer's inbound port");
        for (int leg = 0; leg < 3; leg++) {
            double redirected = Double.parseDouble(legs.group(4 + 3 * leg));
            long bytes = Long.parseLong(legs.group(5 + 3 * leg).replace(",", ""));
            assertTrue(bytes > 0 && redirected >= 0.99, "leg " + leg + ": " + redirected + " of " + bytes + " B");
            assertEquals(2 * captured, Long.parseLong(legs.group(6 + 3 * leg)), "both ends of each connection");
        }
        Matcher proxies = Pattern.compile("\\| CPU % sidecar proxies \\(every pod's\\) \\| ([0-9.]+) \\| ([0-9.]+) \\|")
                .matcher(text);
        assertTrue(proxies.find() && Double.parseDouble(proxies.group(1)) > 0 && Double.parseDouble(proxies.group(2)) > 0,
                "the sidecars worked on both paths: " + text);
    }

    private static String run(String... more) {
        return runArgs(Stream.concat(Arrays.stream(SMALL), Arrays.stream(more)).toArray(String[]::new));
    }

    private static String runArgs(String... args) {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        PrintStream out = new PrintStream(bytes, true, StandardCharsets.UTF_8);
        int rc = new CommandLine(new RagDemo(out)).execute(args);
        String text = bytes.toString(StandardCharsets.UTF_8);
        System.out.println(text);
        assertEquals(0, rc, text);
        return text;
    }

    /**
     * The tables of a run: both paths' rows, the internal hops redirected on the fast path and
     * nothing on the plain path (both read from the kernel's counters), and nothing left behind.
     */
    private static void assertBothPathsMeasured(String text) {
        Matcher p50 = Pattern.compile("\\| P50 latency \\(ms\\) \\| ([0-9.]+) \\| ([0-9.]+) \\| ([0-9.]+) \\|").matcher(text);
        assertTrue(p50.find(), "a P50 row with both paths and a ratio");
        assertTrue(Pattern.compile("\\| P99 latency \\(ms\\) \\| [0-9.]+ \\| [0-9.]+ \\| [0-9.]+ \\|").matcher(text).find());
        Matcher runs = Pattern.compile("\\| sk_msg runs \\(kernel run_cnt\\) \\| 0 \\| ([0-9,]+) \\|").matcher(text);
        assertTrue(runs.find(), "a run count row");
        long verdictRuns = Long.parseLong(runs.group(1).replace(",", ""));
        assertTrue(verdictRuns >= 300 * 6, "the verdict ran for every internal send: " + verdictRuns);
        assertTrue(Pattern.compile("\\| ms a request waiting for a CPU \\(stages' and load's threads\\) \\| [0-9.]+ \\| [0-9.]+ \\|")
                .matcher(text).find(), "how long a request's threads waited for a CPU, on both paths");
        for (String stage : new String[] {"embedding", "search", "context", "gateway"}) {
            Matcher all = Pattern.compile("\\| " + stage + ": all threads \\| ([0-9]+) \\| ([0-9]+) \\|").matcher(text);
            assertTrue(all.find() && Long.parseLong(all.group(1)) > 0 && Long.parseLong(all.group(2)) > 0,
                    "CPU a request of the " + stage + " stage's threads, on both paths");
            assertTrue(text.contains("| " + stage + ": event loops |"), "the " + stage + " stage's event loops");
        }
        for (String row : new String[] {"the request, as the load generator saw it", "  the stages' own work \\(handlers\\)",
                "gateway -> embedding: the call", "  search's own work \\(handler\\)", "gateway -> context: the call"}) {
            Matcher m = Pattern.compile("\\| " + row + " \\| ([0-9.]+) \\| ([0-9.]+) \\|").matcher(text);
            assertTrue(m.find() && Double.parseDouble(m.group(1)) > 0 && Double.parseDouble(m.group(2)) > 0,
                    "a request's time, '" + row + "', on both paths");
        }
        assertTrue(text.contains("failed requests: plain 0, fast 0"), text);
        assertTrue(text.contains("topology: node: each stage and the load generator in a pod of its own"), text);
        Matcher redirected = Pattern.compile("\\| MiB redirected \\(opted-in sockets\\) \\| 0.0 \\| ([0-9.]+) \\|").matcher(text);
        assertTrue(redirected.find() && Double.parseDouble(redirected.group(1)) > 0, "the internal hops redirected");
        Matcher tcp = Pattern.compile("\\| MiB sent by TCP from opted-in sockets \\| 0.0 \\| ([0-9.]+) \\|").matcher(text);
        assertTrue(tcp.find(), "a by-TCP row");
        assertTrue(Double.parseDouble(tcp.group(1)) <= 0.01 * Double.parseDouble(redirected.group(1)),
                "at most 1% of the opted-in bytes by TCP: the VIPs were translated");
        assertEquals(0, ProcessHandle.current().children().count(), "every stage JVM has exited");
        String netns = new String(assertDoesNotThrow(() -> new ProcessBuilder("ip", "netns", "list").start()
                .getInputStream().readAllBytes()), StandardCharsets.UTF_8);
        assertTrue(!netns.contains("-rag"), "the node bed's namespaces are gone: " + netns);
    }
}
