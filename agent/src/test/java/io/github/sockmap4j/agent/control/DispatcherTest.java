package io.github.sockmap4j.agent.control;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.agent.Owner;
import io.github.sockmap4j.control.AgentRequest.Verb;
import io.github.sockmap4j.linux.net.UnixListener;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.function.Function;
import org.junit.jupiter.api.Test;

/**
 * The control socket's dispatch, without root: every verb has exactly one handler, a line is
 * parsed once and a malformed one reaches no handler, a uid past its rate is refused before
 * parsing, and what a handler replies is counted by outcome and reason.
 */
class DispatcherTest {
    static final UnixListener.Credentials USER = new UnixListener.Credentials(4242, 1000, 1000);
    static final Owner CONNECTION = Owner.connection(1);
    final ControlCounts counts = new ControlCounts();
    final List<Request> seen = new ArrayList<>();

    RequestHandler handler(Set<Verb> verbs, Function<Request, Reply> reply) {
        return new RequestHandler() {
            @Override
            public Set<Verb> verbs() {
                return verbs;
            }

            @Override
            public Reply handle(Request request) {
                seen.add(request);
                return reply.apply(request);
            }
        };
    }

    Dispatcher dispatcher(Function<Request, Reply> reply) {
        Set<Verb> rest = EnumSet.allOf(Verb.class);
        rest.remove(Verb.PING);
        return new Dispatcher(ControlServer.Limits.DEFAULT, counts, List.of(Dispatcher.PING, handler(rest, reply)));
    }

    @Test
    void everyVerbHasExactlyOneHandler() {
        Set<Verb> allButList = EnumSet.allOf(Verb.class);
        allButList.remove(Verb.LIST);
        IllegalStateException none = assertThrows(IllegalStateException.class, () -> new Dispatcher(
                ControlServer.Limits.DEFAULT, counts, List.of(handler(allButList, r -> null))));
        assertTrue(none.getMessage().contains("LIST"), none.getMessage());
        IllegalStateException two = assertThrows(IllegalStateException.class, () -> new Dispatcher(
                ControlServer.Limits.DEFAULT, counts,
                List.of(handler(EnumSet.allOf(Verb.class), r -> null), Dispatcher.PING)));
        assertTrue(two.getMessage().contains("PING"), two.getMessage());
    }

    @Test
    void aLineIsParsedOnceAndAMalformedOneReachesNoHandler() {
        Dispatcher d = dispatcher(r -> Reply.changed("rule " + r.ask().rule().port()));
        Dispatcher.Answer bad = d.answer(USER, CONNECTION, "ALLOW 70000 * 0 0");
        assertTrue(bad.text().startsWith("ERR port must be 1..65535"), bad.text());
        assertFalse(bad.changed());
        assertEquals(List.of(), seen);
        assertEquals(1, counts.refusedFor(ControlCounts.Refusal.MALFORMED));

        Dispatcher.Answer ok = d.answer(USER, CONNECTION, "optin 8080 * 0 0");
        assertEquals("OK rule 8080", ok.text());
        assertTrue(ok.changed(), "a change keeps an idle connection open");
        assertEquals(1, seen.size());
        assertEquals(Verb.OPTIN, seen.get(0).ask().verb());
        assertEquals(CONNECTION, seen.get(0).connection());
        assertEquals(1, counts.done());

        Dispatcher.Answer ping = d.answer(USER, CONNECTION, "PING");
        assertEquals("OK agent", ping.text());
        assertFalse(ping.changed(), "a query does not");
        assertEquals(2, counts.done());
        assertEquals(1, seen.size(), "PING is answered by its own handler");
    }

    @Test
    void refusalsAreCountedByReasonAndChangeNothing() {
        Dispatcher d = dispatcher(r -> r.ask().verb() == Verb.DENY
                ? Reply.refused(ControlCounts.Refusal.BOOK, "no such rule of uid 1000")
                : Reply.refused(ControlCounts.Refusal.POLICY, "port 22 is not granted"));
        Dispatcher.Answer policy = d.answer(USER, CONNECTION, "ALLOW 22 * 0 0");
        assertEquals("ERR port 22 is not granted", policy.text());
        assertFalse(policy.changed());
        Dispatcher.Answer book = d.answer(USER, CONNECTION, "DENY 22 * 0");
        assertEquals("ERR no such rule of uid 1000", book.text());
        assertEquals(1, counts.refusedFor(ControlCounts.Refusal.POLICY));
        assertEquals(1, counts.refusedFor(ControlCounts.Refusal.BOOK));
        assertEquals(2, counts.refusedRequests());
        assertEquals(0, counts.done());
    }

    @Test
    void aUidPastItsBurstIsRefusedBeforeParsingAndOthersAreNot() {
        Dispatcher d = dispatcher(r -> Reply.answer("0"));
        int burst = ControlServer.Limits.DEFAULT.burst();
        int refused = 0;
        // A burst's worth and more at once: the rate refills meanwhile, so count, not index.
        for (int i = 0; i < 2 * burst; i++) {
            if (d.answer(USER, CONNECTION, "not even a verb").text().contains("requests a second")) {
                refused++;
            }
        }
        assertTrue(refused > 0, "a uid past its burst is refused");
        assertEquals(refused, counts.refusedFor(ControlCounts.Refusal.RATE));
        assertEquals(2L * burst - refused, counts.refusedFor(ControlCounts.Refusal.MALFORMED));
        UnixListener.Credentials other = new UnixListener.Credentials(4343, 1001, 1001);
        assertEquals("OK 0", d.answer(other, Owner.connection(2), "LIST").text(), "another uid has its own rate");
    }
}
