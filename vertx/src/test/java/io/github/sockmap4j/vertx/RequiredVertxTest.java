package io.github.sockmap4j.vertx;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.testbed.ChildJvm;
import io.github.sockmap4j.SockmapUnavailableException;
import io.vertx.core.Vertx;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code sockmap4j.require=true} with the fast path off (the cgroup named does not exist): a
 * Vert.x HTTP server on the transport does not listen, and says why. In a child JVM, since the
 * setting is process-wide; needs no privileges.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class RequiredVertxTest {
    @Test
    void aRequiredFastPathThatIsOffFailsTheListenWithTheReason() throws Exception {
        try (ChildJvm child = ChildJvm.requiredWhereOff(Main.class)) {
            String server = child.expect("server=", 60);
            assertEquals(0, child.waitFor(30), child.output());
            assertTrue(server.contains(SockmapUnavailableException.class.getSimpleName()), () -> child.output());
            assertTrue(ChildJvm.namesOffCause(server),
                    () -> "names the cause: " + child.output());
        }
    }

    public static final class Main {
        public static void main(String[] args) throws Exception {
            Vertx vertx = Vertx.builder().withTransport(SockmapVertx.transport()).build();
            try {
                vertx.createHttpServer().requestHandler(r -> r.response().end()).listen(0, "127.0.0.1")
                        .toCompletionStage().toCompletableFuture().get(30, TimeUnit.SECONDS);
                System.out.println("server=listening on plain TCP");
            } catch (java.util.concurrent.ExecutionException e) {
                System.out.println("server=refused " + ChildJvm.causes(e.getCause()));
            } finally {
                vertx.close().toCompletionStage().toCompletableFuture().get(30, TimeUnit.SECONDS);
            }
        }
    }
}
