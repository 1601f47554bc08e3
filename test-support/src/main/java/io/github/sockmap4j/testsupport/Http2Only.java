package io.github.sockmap4j.testsupport;

import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * For a test class about gRPC's HTTP/2 over the fast path (what it redirects, its event loops):
 * leaves the co-located transport, on by default under {@code SockmapGrpc.configure}, off for the
 * class's tests ({@code -Dsockmap4j.colocated=false}), and restores what was set after them.
 * Tests run one class at a time in a module's JVM, so no other class sees the change.
 *
 * <pre>{@code @ExtendWith(Http2Only.class)}</pre>
 */
public final class Http2Only implements BeforeAllCallback, AfterAllCallback {
    /** The switch ({@code ColocatedGrpc.SWITCH}, named here without the dependency). */
    static final String SWITCH = "sockmap4j.colocated";
    private static final ExtensionContext.Namespace NS = ExtensionContext.Namespace.create(Http2Only.class);
    private static final String UNSET = "\0unset";

    @Override
    public void beforeAll(ExtensionContext context) {
        String before = System.getProperty(SWITCH);
        context.getStore(NS).put(SWITCH, before == null ? UNSET : before);
        System.setProperty(SWITCH, "false");
    }

    @Override
    public void afterAll(ExtensionContext context) {
        String before = context.getStore(NS).remove(SWITCH, String.class);
        if (before == null || before.equals(UNSET)) {
            System.clearProperty(SWITCH);
        } else {
            System.setProperty(SWITCH, before);
        }
    }
}
