package io.github.sockmap4j.agent;

import io.github.sockmap4j.TestKernel;
import io.github.sockmap4j.admin.PolicyClient;
import io.github.sockmap4j.admin.SockmapAdmin;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

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
        Path file = SockmapAdmin.agentSocket(pins).resolveSibling("agent-rules");
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
            SockmapAdmin.removePins(pins);
            Files.deleteIfExists(cgroup);
        }
    }
}
