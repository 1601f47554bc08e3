package io.github.sockmap4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.testsupport.TestKernel;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Collectors;
import jdk.jfr.Recording;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingFile;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** The fast path's JFR events: state changes with their reason, and per-connection acceleration. */
@Tag("kernel")
class JfrEventsTest {
    @Test
    void stateAndConnectionsAreRecorded() throws Exception {
        Path file = Files.createTempFile("sockmap4j", ".jfr");
        try (Recording r = new Recording()) {
            r.enable("io.github.sockmap4j.FastPathState");
            r.enable("io.github.sockmap4j.Connection");
            r.start();
            try (TestKernel kernel = TestKernel.start("jfr")) {
                try (SockmapServerChannel server = kernel.sockmap.openServerChannel()) {
                    server.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0));
                    try (SockmapChannel c = kernel.sockmap.openChannel()) {
                        c.connect(server.getLocalAddress());
                        server.accept().close();
                    }
                }
            }
            try (Sockmap off = Sockmap.open(SockmapConfig.fromSystemProperties().withRequired(false)
                    .withDisabled(true))) {
                assertTrue(!off.isActive());
            }
            r.stop();
            r.dump(file);
            List<RecordedEvent> events = RecordingFile.readAllEvents(file);
            List<RecordedEvent> states = events.stream()
                    .filter(e -> e.getEventType().getName().equals("io.github.sockmap4j.FastPathState"))
                    .collect(Collectors.toList());
            assertTrue(states.stream().anyMatch(e -> e.getBoolean("active")), "an active state: " + states);
            assertTrue(states.stream().anyMatch(e -> !e.getBoolean("active")
                    && e.getString("reason").contains("sockmap4j.disable=true")), "an off state with its reason");
            assertTrue(states.stream().anyMatch(e -> "closed".equals(e.getString("reason"))), "a close");
            List<RecordedEvent> conns = events.stream()
                    .filter(e -> e.getEventType().getName().equals("io.github.sockmap4j.Connection"))
                    .collect(Collectors.toList());
            assertEquals(2, conns.size(), "one event per end: " + conns);
            assertTrue(conns.stream().allMatch(e -> e.getBoolean("accelerated")), conns.toString());
            assertTrue(conns.stream().allMatch(e -> e.getInt("bound") > 0), conns.toString());
        } finally {
            Files.deleteIfExists(file);
        }
    }
}
