package io.github.sockmap4j.agent.control;

import io.github.sockmap4j.linux.bpf.PolicyRule;
import io.github.sockmap4j.control.AgentRequest;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The bound rule for other users' servers, on listeners given by hand: no root needed. */
class ForeignServersTest {
    static final int PORT = 7050;

    static ForeignServers listening(Listeners.Listener... l) {
        return new ForeignServers((port, pid) -> port == PORT ? List.of(l) : List.of());
    }

    static AgentRequest allow(String network, int keyBits, int bound) throws Exception {
        return new AgentRequest(AgentRequest.Verb.ALLOW,
                new PolicyRule(PORT, network == null ? null : InetAddress.ofLiteral(network), keyBits), bound);
    }

    @Test
    void anotherUsersServerKeepsItsBound() throws Exception {
        ForeignServers root = listening(new Listeners.Listener(0, InetAddress.ofLiteral("127.0.0.1"), PORT));
        String no = root.refusal(1000, 1, allow("127.0.0.1", 128, 1));
        assertTrue(no != null && no.startsWith("uid 0 listens on 127.0.0.1:7050"), no);
        assertTrue(root.refusal(1000, 1, allow("127.0.0.0", 104, 1)) != null, "a network that covers it");
        assertTrue(root.refusal(1000, 1, allow(null, 0, 1)) != null, "any address");
        String none = root.refusal(1000, 1, allow("10.0.0.0", 104, 1));
        assertTrue(none != null && none.startsWith("no server of uid 1000 listens on port 7050"),
                "a network that does not cover it, with no server of its own there: " + none);
        assertNull(root.refusal(1000, 1, allow("127.0.0.1", 128, 0)), "the receiver's own bound");
        assertNull(root.refusal(0, 1, allow("127.0.0.1", 128, 1)), "root");
    }

    @Test
    void aWildcardListenerIsUnderEveryNetworkAndOnesOwnIsNot() throws Exception {
        ForeignServers any = listening(new Listeners.Listener(0, InetAddress.ofLiteral("::"), PORT));
        assertTrue(any.refusal(1000, 1, allow("10.0.0.0", 104, 1)) != null);
        ForeignServers mine = listening(new Listeners.Listener(1000, InetAddress.ofLiteral("0.0.0.0"), PORT));
        assertNull(mine.refusal(1000, 1, allow("127.0.0.1", 128, 65536)), "its own server");
    }

    /** Trust III, row 12: a bound set before anyone listens would fall on whoever listens next. */
    @Test
    void noBoundAheadOfAServer() throws Exception {
        ForeignServers nobody = listening();
        String no = nobody.refusal(1000, 1, allow("127.0.0.1", 128, 1));
        assertTrue(no != null && no.contains("no server of uid 1000 listens on port 7050 within 127.0.0.1:7050/128"), no);
        assertNull(nobody.refusal(1000, 1, allow("127.0.0.1", 128, 0)), "the receiver's own bound needs no server");
        assertNull(nobody.refusal(0, 1, allow("127.0.0.1", 128, 1)), "root");
    }

    /** Trust III, row 8: where a namespace holds more listeners than are read, a user's bound is refused, root's not. */
    @Test
    void tooManyListenersToReadRefuseAUsersBound() throws Exception {
        ForeignServers unknown = new ForeignServers((port, pid) -> {
            throw Listeners.NotRead.tooMany(42);
        });
        String no = unknown.refusal(1000, 1, allow("127.0.0.1", 128, 1));
        assertTrue(no != null && no.contains("more than " + Listeners.MAX_PER_FILE + " listening sockets")
                && no.contains("only root may set a bound"), no);
        assertNull(unknown.refusal(0, 1, allow("127.0.0.1", 128, 1)), "root");
        assertNull(unknown.refusal(1000, 1, allow("127.0.0.1", 128, 0)), "the receiver's own bound");
    }
}
