package io.github.sockmap4j.agent;

import io.github.sockmap4j.admin.PolicyClient;
import io.github.sockmap4j.admin.SockmapAdmin;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.testsupport.TestKernel;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The agent's rules file is a journal: a request appends what it changed, the file is compacted
 * once it has grown past its live rules, and a restarted agent adopts exactly the live rules
 * whichever form the file is in.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
@Tag("kernel")
class AgentRulesFileTest {
    static InetAddress address(int i) throws Exception {
        return InetAddress.getByAddress(new byte[] {10, 9, (byte) (i >> 8), (byte) i});
    }

    @Test
    void requestsAppendAndARestartAdoptsTheLiveRules() throws Exception {
        Path cgroup = TestKernel.newCgroup("rules-file");
        Path pins = Path.of("/sys/fs/bpf").resolve(TestKernel.uniqueName("rules-file"));
        NodeAgent.Options options = new NodeAgent.Options(pins, List.of(cgroup), null, 1024, false);
        Path file = SockmapAdmin.of(pins).agentSocket().resolveSibling("agent-rules");
        NodeAgent agent = NodeAgent.start(options);
        try {
            int n = 3000;
            try (PolicyClient c = PolicyClient.open(pins)) {
                for (int i = 0; i < n; i++) {
                    c.allow(9000, address(i), 32, 0);
                }
                // One line appended per rule, none rewritten.
                assertEquals(n, Files.readAllLines(file).size());
                assertTrue(Files.readAllLines(file).stream().allMatch(l -> l.startsWith("+\t")));
                for (int i = 0; i < n; i += 2) {
                    c.deny(9000, address(i), 32);
                }
                assertEquals(n + n / 2, Files.readAllLines(file).size(), "each deny appends its removal");
            }
            agent.close();
            agent = NodeAgent.start(options);
            assertEquals(n / 2, agent.rules(), "the live rules adopted: " + agent.rules());
            assertEquals(n / 2, Files.readAllLines(file).size(), "compacted at adoption");
            assertTrue(agent.describeRules().stream().allMatch(r -> r.contains("held by uid 0 (user)")));
            try (PolicyClient c = PolicyClient.open(pins)) {
                // Allow and deny the same rule until the journal outgrows its live lines: it is compacted.
                for (int i = 0; i < 3000; i++) {
                    c.allow(9001, null, 0, 0);
                    c.deny(9001, null, 0);
                }
                int lines = Files.readAllLines(file).size();
                assertTrue(lines <= 4096 + 2 * (n / 2) + 2, "compacted while running: " + lines + " lines");
                assertEquals(n / 2, agent.rules());
            }
            agent.close();
            agent = NodeAgent.start(options);
            assertEquals(n / 2, agent.rules(), "after compaction too");
        } finally {
            agent.close();
            SockmapAdmin.of(pins).removePins();
            Files.deleteIfExists(cgroup);
        }
    }

    /**
     * A line that does not read at start (an address with a scope whose interface is gone, as an
     * older agent wrote it; a hand edit) is set aside with a WARN; the agent starts with the rest.
     */
    @Test
    void aLineThatNoLongerReadsIsSetAsideAndTheAgentStarts() throws Exception {
        Path cgroup = TestKernel.newCgroup("rules-aside");
        Path pins = Path.of("/sys/fs/bpf").resolve(TestKernel.uniqueName("rules-aside"));
        NodeAgent.Options options = new NodeAgent.Options(pins, List.of(cgroup), null, 1024, false);
        Path rules = SockmapAdmin.of(pins).agentSocket().resolveSibling("agent-rules");
        Path services = SockmapAdmin.of(pins).agentSocket().resolveSibling("agent-services");
        Path rulesAside = rules.resolveSibling("agent-rules.set-aside");
        Path servicesAside = services.resolveSibling("agent-services.set-aside");
        NodeAgent agent = NodeAgent.start(options);
        try {
            try (PolicyClient c = PolicyClient.open(pins)) {
                c.allow(9100, address(1), 32, 0);
            }
            agent.close();
            String good = Files.readAllLines(rules).getFirst();
            String[] f = (good.startsWith("+\t") ? good.substring(2) : good).split("\t");
            f[3] = "9101";
            f[4] = "fd00::1%sm4jgone0";
            String scoped = String.join("\t", f);
            Files.writeString(rules, "+\t" + scoped + "\n+\tnot\ta\trule\n", java.nio.file.StandardOpenOption.APPEND);
            Files.writeString(services, "0\tfd00::2%sm4jgone0\t80\tput by hand\n", java.nio.file.StandardOpenOption.CREATE,
                    java.nio.file.StandardOpenOption.APPEND);

            agent = NodeAgent.start(options);
            assertEquals(1, agent.rules(), "the rule that reads, adopted: " + agent.describeRules());
            assertEquals(List.of(scoped, "not\ta\trule"), Files.readAllLines(rulesAside), "both set aside, as they were");
            assertEquals(List.of("0\tfd00::2%sm4jgone0\t80\tput by hand"), Files.readAllLines(servicesAside));
            assertTrue(Files.readAllLines(rules).stream().noneMatch(l -> l.contains("%") || l.contains("not\ta")),
                    "the journal keeps only lines that read: " + Files.readAllLines(rules));
            assertEquals("600", Integer.toOctalString(Files.getPosixFilePermissions(rulesAside).stream()
                    .mapToInt(p -> 1 << (8 - p.ordinal())).sum()), "root-only");
        } finally {
            agent.close();
            SockmapAdmin.of(pins).removePins();
            Files.deleteIfExists(cgroup);
            Files.deleteIfExists(rulesAside);
            Files.deleteIfExists(servicesAside);
        }
    }
}
