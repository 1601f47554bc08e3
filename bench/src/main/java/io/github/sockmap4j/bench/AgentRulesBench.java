package io.github.sockmap4j.bench;

import io.github.sockmap4j.agent.NodeAgent;
import io.github.sockmap4j.admin.PolicyClient;
import io.github.sockmap4j.admin.SockmapAdmin;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * A node agent's cost per rule as its policy grows to the map's 65,536 entries: root's ALLOW
 * requests over the control socket, timed in blocks of 4,096 (median µs per request in each
 * block), the rules file's size, the JVM's RSS (the agent runs in it), a restart's adoption time
 * and a LIST of every rule; then every rule denied. Its own pin directory and the cgroup given,
 * removed at the end.
 *
 * <p>Usage: {@code AgentRulesBench CGROUP [rules]} (default 65536).
 */
public final class AgentRulesBench {
    private AgentRulesBench() {
    }

    public static void main(String[] args) throws Exception {
        BenchRun run = BenchRun.of("AgentRulesBench CGROUP [rules]", args);
        Path cgroup = Path.of(args[0]);
        int n = run.intArg(1, 65_536);
        Path pins = Path.of("/sys/fs/bpf", "sockmap4j-agentrules-" + ProcessHandle.current().pid());
        NodeAgent.Options options = new NodeAgent.Options(pins, List.of(cgroup), null, 1024, false);
        Path rulesFile = SockmapAdmin.of(pins).agentSocket().resolveSibling("agent-rules");
        NodeAgent agent = NodeAgent.start(options);
        try {
            System.out.printf(Locale.ROOT, "agent rules benchmark: %d ALLOW requests of root, %s%n", n,
                    BenchRun.machine());
            System.out.println("rules   median us/request   rules file (KiB)   RSS (MiB)");
            int block = 4096;
            long[] t = new long[block];
            try (PolicyClient client = PolicyClient.open(pins)) {
                for (int i = 0; i < n; i++) {
                    long t0 = System.nanoTime();
                    client.allow(1 + i % 65_535, address(i), 32, 0);
                    t[i % block] = System.nanoTime() - t0;
                    if ((i + 1) % block == 0 || i == n - 1) {
                        int used = (i % block) + 1;
                        long[] s = Arrays.copyOf(t, used);
                        Arrays.sort(s);
                        System.out.printf(Locale.ROOT, "%6d   %17.1f   %16d   %9d%n", i + 1, s[used / 2] / 1e3,
                                Files.size(rulesFile) >> 10, rssMiB());
                    }
                }
                long l0 = System.nanoTime();
                int listed = client.rules().size();
                System.out.printf(Locale.ROOT, "LIST of %d rules: %.1f ms%n", listed, (System.nanoTime() - l0) / 1e6);
            }
            agent.close();
            long r0 = System.nanoTime();
            agent = NodeAgent.start(options);
            System.out.printf(Locale.ROOT, "restart: %d rules adopted in %.1f ms%n", agent.rules(),
                    (System.nanoTime() - r0) / 1e6);
            long d0 = System.nanoTime();
            try (PolicyClient client = PolicyClient.open(pins)) {
                for (int i = 0; i < n; i++) {
                    client.deny(1 + i % 65_535, address(i), 32);
                }
            }
            System.out.printf(Locale.ROOT, "deny all: %.1f us per request, rules file %d KiB after%n",
                    (System.nanoTime() - d0) / 1e3 / n, Files.size(rulesFile) >> 10);
        } finally {
            agent.close();
            SockmapAdmin.of(pins).removePins();
        }
    }

    static InetAddress address(int i) throws Exception {
        return InetAddress.getByAddress(new byte[] {10, (byte) (i >> 16), (byte) (i >> 8), (byte) i});
    }

    static long rssMiB() throws Exception {
        for (String l : Files.readAllLines(Path.of("/proc/self/status"))) {
            if (l.startsWith("VmRSS:")) {
                return Long.parseLong(l.replaceAll("[^0-9]", "")) >> 10;
            }
        }
        return -1;
    }
}
