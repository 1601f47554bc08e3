package io.github.sockmap4j.agent;

import io.github.sockmap4j.SockmapChannel;
import io.github.sockmap4j.admin.PolicyClient;
import io.github.sockmap4j.admin.SockmapAdmin;
import io.github.sockmap4j.testbed.Await;
import io.github.sockmap4j.testbed.ChildJvm;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.testsupport.TestKernel;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/**
 * docs/kernel.md "Privileges and pin files" on this kernel: a process with no capability at all (uid nobody, every
 * capability dropped) opts a port in through a pin the privileged owner granted to its group,
 * and is refused where it was not granted.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@Tag("kernel")
class UnprivilegedOptInTest {
    TestKernel kernel;
    Path classpathCopy;
    String classpath;

    @BeforeAll
    void start() throws IOException {
        kernel = TestKernel.start("unpriv");
        // nobody cannot read /root: the child runs from a copy of the class path it may read.
        classpathCopy = Files.createTempDirectory("sm4j-cp");
        List<String> entries = new ArrayList<>();
        int i = 0;
        for (String e : ChildJvm.classpath().split(java.io.File.pathSeparator)) {
            Path src = Path.of(e);
            if (!Files.exists(src)) {
                continue;
            }
            Path dst = classpathCopy.resolve((i++) + "-" + src.getFileName());
            copy(src, dst);
            entries.add(dst.toString());
        }
        classpath = String.join(java.io.File.pathSeparator, entries);
        try (Stream<Path> all = Files.walk(classpathCopy)) {
            for (Path p : (Iterable<Path>) all::iterator) {
                Files.setPosixFilePermissions(p, PosixFilePermissions.fromString(Files.isDirectory(p) ? "rwxr-xr-x"
                        : "rw-r--r--"));
            }
        }
    }

    static void copy(Path src, Path dst) throws IOException {
        if (Files.isDirectory(src)) {
            try (Stream<Path> all = Files.walk(src)) {
                for (Path p : (Iterable<Path>) all::iterator) {
                    Path t = dst.resolve(src.relativize(p).toString());
                    if (Files.isDirectory(p)) {
                        Files.createDirectories(t);
                    } else {
                        Files.copy(p, t);
                    }
                }
            }
        } else {
            Files.copy(src, dst);
        }
    }

    @AfterAll
    void stop() throws IOException {
        try (Stream<Path> all = Files.walk(classpathCopy)) {
            all.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        }
        kernel.close();
    }

    ChildJvm unprivileged(int port) throws IOException {
        return unprivileged(UnprivilegedMains.UnprivilegedOptIn.class, kernel.pinDir, port);
    }

    ChildJvm unprivileged(Class<?> main, Path pinDir, int port) throws IOException {
        return ChildJvm.start(List.of("setpriv", "--reuid=65534", "--regid=65534", "--init-groups",
                "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--",
                ChildJvm.java(), "--enable-native-access=ALL-UNNAMED", "-cp", classpath,
                main.getName(), pinDir.toString(), Integer.toString(port)));
    }

    @Test
    void throughAnAgentTheLibraryOfAnUnprivilegedProcessOptsInWhatThePolicyAllows() throws Exception {
        Path cgroup = TestKernel.newCgroup("unpriv-agent");
        Path pins = Path.of("/sys/fs/bpf").resolve(TestKernel.uniqueName("unpriv-agent"));
        Path policy = Files.createTempFile("policy", "");
        int port = freePort();
        try {
            Files.writeString(policy, "uid 65534 " + port + " * 0\n");
            try (NodeAgent agent = NodeAgent.start(new NodeAgent.Options(pins, List.of(cgroup), policy, 1024, false))) {
                try (ChildJvm child = unprivileged(UnprivilegedMains.UnprivilegedLibraryOptIn.class, pins, port)) {
                    assertEquals("false", child.expect("active=", 60), "it can read none of the kernel's maps");
                    String cause = child.expect("cause=", 30);
                    assertTrue(cause.contains("missing privileges") && cause.contains("go through the sockmap4j agent"),
                            cause);
                    assertEquals("true", child.expect("opted=", 30), child.output());
                    assertTrue(agent.describeRules().stream().anyMatch(r -> r.startsWith(port + " ")
                            && r.contains("uid 65534")), agent.describeRules().toString());
                    child.send("quit");
                    assertEquals(0, child.waitFor(30));
                }
                Await.until("its opt-in went with it", () -> agent.rules() == 0);
                // A port the policy does not grant: plain TCP, the agent's reason in the log.
                try (ChildJvm child = unprivileged(UnprivilegedMains.UnprivilegedLibraryOptIn.class, pins, port + 1)) {
                    assertEquals("false", child.expect("opted=", 60));
                    assertTrue(child.output().contains("uid 65534 may not opt in port " + (port + 1)), child.output());
                    child.send("quit");
                    assertEquals(0, child.waitFor(30));
                }
            }
        } finally {
            SockmapAdmin.of(pins).removePins();
            Files.deleteIfExists(policy);
            Files.delete(cgroup);
        }
    }

    static int freePort() throws IOException {
        try (ServerSocketChannel s = ServerSocketChannel.open()) {
            s.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0));
            return ((InetSocketAddress) s.getLocalAddress()).getPort();
        }
    }

    @Test
    void withoutAGrantTheUnprivilegedProcessIsRefusedAndToldWhy() throws Exception {
        // As the pins are made: root's only (whatever another test granted).
        Files.setPosixFilePermissions(kernel.pinDir.resolve("policy"), PosixFilePermissions.fromString("rw-------"));
        try (ChildJvm child = unprivileged(freePort())) {
            assertEquals("65534", child.expect("uid=", 60));
            String error = child.expect("error=", 30);
            assertTrue(error.contains("grant"), error);
            assertEquals(0, child.waitFor(30));
        }
    }

    @Test
    void aGrantedGroupOptsInWithoutAnyCapability() throws Exception {
        PolicyClient.grant(kernel.pinDir, "nogroup");
        int port = freePort();
        try (ChildJvm child = unprivileged(port)) {
            assertEquals("65534", child.expect("uid=", 60));
            assertEquals(Integer.toString(port), child.expect("opted=", 30));
            assertTrue(kernel.policyHas(port), "the port is in the kernel's policy");
            // A server on that port in the attached cgroup now takes the fast path.
            try (ServerSocketChannel server = ServerSocketChannel.open()) {
                server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), port));
                try (SockmapChannel c = kernel.sockmap.openChannel()) {
                    c.connect(server.getLocalAddress());
                    try (var side = server.accept()) {
                        assertTrue(c.isAccelerated(), "opted in by an unprivileged process");
                        assertTrue(side.isOpen());
                    }
                }
            }
            child.send("quit");
            assertEquals(0, child.waitFor(30));
        }
        assertTrue(!kernel.policyHas(port), "its close opted the port out");
    }
}
