package io.github.sockmap4j.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.OptIn;
import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapConfig;
import io.github.sockmap4j.admin.PolicyClient;
import io.github.sockmap4j.admin.SockmapAdmin;
import io.github.sockmap4j.linux.bpf.PolicyMap;
import io.github.sockmap4j.linux.bpf.PolicyRule;
import io.github.sockmap4j.linux.ffi.Libbpf;
import io.github.sockmap4j.testsupport.TestKernel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A service with the privileges to open the kernel's objects itself, beside a node agent of the
 * same pins: its opt-ins go through the agent, the policy map's one writer while it runs, so a
 * rule the agent holds for someone else stays when the service lets go of its own hold. Before,
 * the service wrote the map itself: its opt-in and close of a port root had allowed through the
 * agent removed the map's entry while the agent still listed the rule.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@Tag("kernel")
class PrivilegedServiceBesideAgentTest {
    @Test
    void itsOptInsAreHeldByTheAgentAndTakeNobodyElsesHold() throws Exception {
        Path cgroup = TestKernel.newCgroup("beside-agent");
        Path pins = Path.of("/sys/fs/bpf").resolve(TestKernel.uniqueName("beside-agent"));
        NodeAgent agent = NodeAgent.start(new NodeAgent.Options(pins, List.of(cgroup), null, 1024, false));
        try (PolicyMap map = PolicyMap.open(Libbpf.load(), pins)) {
            try (PolicyClient root = PolicyClient.open(pins)) {
                root.allow(9100, null, 0, 0);
            }
            try (Sockmap service = Sockmap.open(SockmapConfig.builder().pinDirectory(pins).cgroup(cgroup).build())) {
                OptIn first = service.optIn(9100);
                OptIn second = service.optIn(9100);
                assertTrue(first.active() && second.active());
                assertEquals(List.of("uid 0 (user)", "uid 0 (conn"), holders(agent, 9100),
                        "held by root's ALLOW and by the service's connection: " + agent.describeRules());
                first.close();
                assertEquals(2, holders(agent, 9100).size(), "the same rule twice is released at its last close: "
                        + agent.describeRules());
                second.close();
                assertEquals(List.of("uid 0 (user)"), holders(agent, 9100), "the service's hold alone went: "
                        + agent.describeRules());
                assertTrue(map.rules().contains(PolicyRule.anyAddress(9100)), "root's ALLOW still in the map: "
                        + map.rules());

                OptIn alone = service.optIn(9101);
                assertTrue(map.rules().contains(PolicyRule.anyAddress(9101)));
                alone.close();
                assertTrue(!map.rules().contains(PolicyRule.anyAddress(9101)) && holders(agent, 9101).isEmpty(),
                        "a rule the service alone held leaves with its close: " + map.rules());

                service.optIn(9102); // left open: it goes with the service's connection
            }
            await(() -> !map.rules().contains(PolicyRule.anyAddress(9102)), "the service closed: its rule goes");
            assertTrue(holders(agent, 9102).isEmpty(), agent.describeRules().toString());
            assertTrue(map.rules().contains(PolicyRule.anyAddress(9100)));
        } finally {
            agent.close();
            SockmapAdmin.of(pins).removePins();
            Files.deleteIfExists(cgroup);
        }
    }

    /** The holders of {@code port}'s rule as the agent lists them ("uid 0 (user)", "uid 0 (conn" ...), in order. */
    private static List<String> holders(NodeAgent agent, int port) {
        for (String r : agent.describeRules()) {
            if (r.startsWith(port + " ")) {
                return java.util.Arrays.stream(r.substring(r.indexOf("held by ") + 8).split(", "))
                        .map(h -> h.startsWith("uid 0 (conn") ? "uid 0 (conn" : h).toList();
            }
        }
        return List.of();
    }

    private static void await(BooleanSupplier done, String what) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!done.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("not within 10 s: " + what);
            }
            Thread.sleep(10);
        }
    }
}
