package io.github.sockmap4j.netty;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * On one CPU no loop and no executor thread polls: a poll there could only delay the peer it
 * waits for. A JVM held to one CPU by {@code taskset} (its available processors follow the
 * affinity) is asked, and one with every CPU of this machine; no root, no kernel state.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class PollingOnOneCpuTest {
    /** What a JVM says about polling: "cpus=N polls=true|false executor polls=true|false". */
    public static void main(String[] args) {
        System.out.println("cpus=" + Runtime.getRuntime().availableProcessors() + " polls="
                + PollBeforeBlock.polls(SockmapNetty.ioHandlerFactory(Duration.ofNanos(50_000)))
                + " executor polls=" + new PollingExecutor("one-cpu", Duration.ofNanos(50_000)).polls());
    }

    static String ask(List<String> prefix) throws IOException, InterruptedException {
        List<String> cmd = new java.util.ArrayList<>(prefix);
        cmd.addAll(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=error", "-cp", System.getProperty("java.class.path"),
                PollingOnOneCpuTest.class.getName()));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes()).strip();
        assertTrue(p.waitFor(30, TimeUnit.SECONDS), "the JVM ended");
        assertEquals(0, p.exitValue(), out);
        String[] lines = out.split("\n");
        return lines[lines.length - 1];
    }

    @Test
    void aJvmOnOneCpuDoesNotPollAndOneOnMoreDoes() throws Exception {
        Path taskset = Path.of("/usr/bin/taskset");
        assertTrue(Files.isExecutable(taskset), "taskset (util-linux) is installed");
        assertEquals("cpus=1 polls=false executor polls=false", ask(List.of(taskset.toString(), "-c", "0")));
        int cpus = Runtime.getRuntime().availableProcessors();
        assertEquals("cpus=" + cpus + " polls=" + (cpus >= 2) + " executor polls=" + (cpus >= 2), ask(List.of()));
    }
}
