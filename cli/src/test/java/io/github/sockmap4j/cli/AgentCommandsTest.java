package io.github.sockmap4j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.admin.SockmapAdmin;
import io.github.sockmap4j.agent.AgentCommand;
import io.github.sockmap4j.testbed.ChildJvm;
import io.github.sockmap4j.testsupport.Leftovers;
import io.github.sockmap4j.testsupport.TestKernel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.Timeout;

/**
 * The operator's commands against a running agent, as an operator types them: the agent started
 * by {@code sockmap4j agent}, then {@code allow} (with {@code --bound}), {@code rules},
 * {@code status}, {@code service add|list|rm}, {@code deny}, {@code up} on a pin directory another
 * user made, and {@code down}, refused while the agent serves and forced with {@code --force}.
 * What the agent does with rules and Services on the kernel is the agent module's tests'.
 */
@Tag("kernel")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class AgentCommandsTest {
    Path cgroup;
    Path pins;
    ChildJvm agent;

    @BeforeAll
    void start() throws Exception {
        cgroup = TestKernel.newCgroup("cli-agent");
        pins = Path.of("/sys/fs/bpf").resolve(TestKernel.uniqueName("cli-agent"));
        startAgent();
    }

    void startAgent() throws Exception {
        agent = ChildJvm.start(ChildJvm.javaCommand(SockmapCli.class, "--pin-dir", pins.toString(), "agent",
                "--cgroup", cgroup.toString(), "--metrics-port", "-1"));
        agent.expect("agent: ready", 60);
    }

    @AfterAll
    void stop() throws Exception {
        Leftovers.closeAll(() -> Leftovers.removeAgent(agent, pins), () -> Leftovers.removeCgroups(cgroup));
    }

    CommandLineTest.Result cli(String... args) {
        List<String> all = new ArrayList<>(List.of("--pin-dir", pins.toString()));
        all.addAll(List.of(args));
        return CommandLineTest.run(all.toArray(String[]::new));
    }

    @Test
    @Order(1)
    void rulesAsAnOperatorTypesThem() {
        CommandLineTest.Result allowed = cli("allow", "47401", "47402/10.0.0.0/8");
        assertEquals(0, allowed.code(), allowed.err());
        assertTrue(allowed.out().contains("allowed 2 rule(s)"), allowed.out());
        assertEquals(0, cli("allow", "47403", "--bound", "65536").code());
        CommandLineTest.Result rules = cli("rules");
        assertEquals(0, rules.code(), rules.err());
        assertTrue(rules.out().contains("47401") && rules.out().contains("47402")
                && rules.out().contains("47403 bound 65536 held by uid 0 (user)") && rules.out().contains("3 rule(s)"),
                rules.out());
        CommandLineTest.Result status = cli("status");
        assertEquals(0, status.code(), status.err());
        assertTrue(status.out().startsWith("up (pinned by 'up' or an agent): pins " + pins), status.out());
        CommandLineTest.Result denied = cli("deny", "47401", "47402/10.0.0.0/8", "47403");
        assertEquals(0, denied.code(), denied.err());
        assertTrue(denied.out().contains("denied 3 rule(s)"), denied.out());
        CommandLineTest.Result again = cli("deny", "47401");
        assertEquals(1, again.code(), "the agent refuses a rule that is not there: " + again.out());
        assertTrue(again.err().contains("47401"), again.err());
        assertTrue(cli("rules").out().contains("0 rule(s)"), "none left");
    }

    @Test
    @Order(2)
    void servicesAsAnOperatorTypesThem() {
        CommandLineTest.Result added = cli("service", "add", "10.96.7.7:47411", "--local", "10.244.1.3:47411",
                "--remote", "10.244.2.3:47411");
        assertEquals(0, added.code(), added.err());
        assertTrue(added.out().contains("service 10.96.7.7:47411: 1 local, 1 remote endpoint(s)"), added.out());
        CommandLineTest.Result listed = cli("service", "list");
        assertTrue(listed.out().contains("10.96.7.7:47411 local=10.244.1.3:47411 remote=10.244.2.3:47411 put by uid 0")
                && listed.out().contains("1 service(s)"), listed.out());
        CommandLineTest.Result removed = cli("service", "rm", "10.96.7.7:47411");
        assertEquals(0, removed.code(), removed.err());
        assertTrue(removed.out().contains("removed service 10.96.7.7:47411"), removed.out());
        CommandLineTest.Result again = cli("service", "rm", "10.96.7.7:47411");
        assertEquals(1, again.code(), "the agent refuses a Service that is not there: " + again.out());
        assertTrue(again.err().contains("10.96.7.7:47411"), again.err());
        CommandLineTest.Result bad = cli("service", "add", "10.96.7.7", "--local", "10.244.1.3:47411");
        assertEquals(2, bad.code(), "usage: " + bad.err());
        assertTrue(bad.err().contains("'10.96.7.7' is not ADDRESS:PORT"), bad.err());
    }

    @Test
    @Order(3)
    void upOnAPinDirectoryAnotherUserMadeIsRefused() throws Exception {
        Path planted = Path.of("/sys/fs/bpf").resolve(TestKernel.uniqueName("planted"));
        Files.createDirectory(planted);
        try {
            Files.setAttribute(planted, "unix:uid", 65534);
            Files.setPosixFilePermissions(planted, PosixFilePermissions.fromString("rwxrwxrwx"));
            CommandLineTest.Result up = CommandLineTest.run("--pin-dir", planted.toString(), "up", "--cgroup",
                    cgroup.toString());
            assertEquals(1, up.code());
            assertTrue(up.err().contains("refusing the pin directory " + planted) && up.err().contains("uid 65534"),
                    up.err());
            try (var files = Files.list(planted)) {
                assertEquals(0, files.count(), "nothing pinned there");
            }
            assertFalse(Files.exists(SockmapAdmin.of(planted).agentSocket().getParent()), "no lock directory either");
        } finally {
            Files.delete(planted);
        }
    }

    @Test
    @Order(4)
    void downIsRefusedWhileTheAgentServesAndForcedItMakesTheAgentExit() throws Exception {
        CommandLineTest.Result down = cli("down");
        assertEquals(1, down.code());
        assertTrue(down.err().contains("a sockmap4j agent serves " + pins) && down.err().contains("--force"),
                down.err());
        assertTrue(Files.exists(pins.resolve("policy")), "nothing removed");
        assertEquals(0, cli("down", "--force").code());
        assertEquals(AgentCommand.PINS_LOST, agent.waitFor(30), agent.output());
        assertTrue(agent.output().contains("were removed while the agent ran"), agent.output());
        startAgent(); // it sets them up again, as whatever restarts it would
    }
}
