package io.github.sockmap4j.micronaut;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.testbed.ChildJvm;
import io.github.sockmap4j.SockmapUnavailableException;
import io.micronaut.context.ApplicationContext;
import io.micronaut.runtime.server.EmbeddedServer;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code sockmap4j.require=true} with the fast path off (the cgroup named does not exist): a
 * Micronaut server on the {@code sockmap} transport does not start, and says why. In a child JVM,
 * since the setting is process-wide; needs no privileges.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class RequiredMicronautTest {
    @Test
    void aRequiredFastPathThatIsOffFailsTheStartWithTheReason() throws Exception {
        try (ChildJvm child = ChildJvm.requiredWhereOff(Main.class)) {
            String server = child.expect("server=", 60);
            assertEquals(0, child.waitFor(30), child.output());
            assertTrue(server.contains(SockmapUnavailableException.class.getSimpleName()), () -> child.output());
            assertTrue(ChildJvm.namesOffCause(server),
                    () -> "names the cause: " + child.output());
        }
    }

    public static final class Main {
        public static void main(String[] args) {
            try (EmbeddedServer server = ApplicationContext.run(EmbeddedServer.class, Map.of(
                    "micronaut.server.host", "127.0.0.1", "micronaut.server.port", -1,
                    "micronaut.netty.event-loops.default.transport", "sockmap",
                    "micronaut.server.netty.parent.transport", "sockmap"))) {
                System.out.println("server=started on plain TCP at " + server.getPort());
            } catch (RuntimeException e) {
                System.out.println("server=refused " + ChildJvm.causes(e));
            }
        }
    }
}
