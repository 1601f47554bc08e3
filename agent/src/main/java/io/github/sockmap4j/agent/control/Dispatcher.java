package io.github.sockmap4j.agent.control;

import io.github.sockmap4j.agent.Owner;
import io.github.sockmap4j.control.AgentRequest;
import io.github.sockmap4j.linux.net.UnixListener;
import java.util.EnumMap;
import java.util.List;
import java.util.Set;

/**
 * The control socket's requests, one line at a time: a uid past its rate is refused, the line is
 * parsed once ({@link AgentRequest#parse}, the one decoder, shared with the clients), the request
 * goes to the one handler of its verb, and what the handler replies is counted and logged here
 * ({@link ControlCounts}). Handlers only decide: {@link RuleRequests} (ALLOW, OPTIN, BOUND, DENY,
 * LIST), {@link ServiceRequests} (SERVICE, UNSERVICE, SERVICES), and PING here.
 *
 * <p><b>Note:</b> this class is threadsafe: each connection's thread calls {@link #answer}.
 */
public final class Dispatcher {
    /** PING: is the agent there? */
    static final RequestHandler PING = new RequestHandler() {
        @Override
        public Set<AgentRequest.Verb> verbs() {
            return Set.of(AgentRequest.Verb.PING);
        }

        @Override
        public Reply handle(Request request) {
            return Reply.answer("agent");
        }
    };

    private final EnumMap<AgentRequest.Verb, RequestHandler> handlers = new EnumMap<>(AgentRequest.Verb.class);
    private final RequestRate rate;
    private final ControlCounts counts;
    private final ControlServer.Limits limits;

    /**
     * @param limits   the uids' request rate (and burst)
     * @param counts   where what was done and refused is counted
     * @param rules    the rule verbs' handler
     * @param services the Service verbs' handler
     * @throws IllegalStateException when a verb has no handler or two
     */
    public Dispatcher(ControlServer.Limits limits, ControlCounts counts, RuleRequests rules, ServiceRequests services) {
        this(limits, counts, List.of(PING, rules, services));
    }

    /** With {@code handlers}, which must serve every verb once. */
    Dispatcher(ControlServer.Limits limits, ControlCounts counts, List<RequestHandler> handlers) {
        this.limits = limits;
        this.counts = counts;
        this.rate = new RequestRate(limits.requestsPerSecond(), limits.burst());
        for (RequestHandler h : handlers) {
            for (AgentRequest.Verb v : h.verbs()) {
                if (this.handlers.put(v, h) != null) {
                    throw new IllegalStateException("two handlers serve " + v);
                }
            }
        }
        for (AgentRequest.Verb v : AgentRequest.Verb.values()) {
            if (!this.handlers.containsKey(v)) {
                throw new IllegalStateException("no handler serves " + v);
            }
        }
    }

    /** What was done and refused. */
    public ControlCounts counts() {
        return counts;
    }

    /**
     * What a request line was answered: {@code text} (one line, or for LIST and SERVICES a count
     * and that many lines), and whether it changed anything: only such a request keeps an idle
     * connection open.
     */
    record Answer(String text, boolean changed) {
    }

    /** The answer to one line of {@code who}'s, on its connection {@code connection}. */
    Answer answer(UnixListener.Credentials who, Owner connection, String line) {
        if (!rate.take(who.uid())) {
            counts.count(ControlCounts.Refusal.RATE);
            return new Answer("ERR uid " + who.uid() + " sends more than " + limits.requestsPerSecond()
                    + " requests a second: slow down and send it again", false);
        }
        AgentRequest ask;
        try {
            ask = AgentRequest.parse(line);
        } catch (IllegalArgumentException e) {
            counts.count(ControlCounts.Refusal.MALFORMED);
            return new Answer("ERR " + e.getMessage(), false);
        }
        Reply reply = handlers.get(ask.verb()).handle(new Request(who, connection, line, ask));
        if (reply.refusal() != null) {
            counts.count(reply.refusal());
            if (reply.refusal() == ControlCounts.Refusal.POLICY) {
                counts.logRefusal(who.uid(), "Refused '{}' of uid {} (pid {}): {}", line, who.uid(), who.pid(),
                        reply.text().substring("ERR ".length()));
            }
        } else {
            counts.countDone();
            if (reply.change() != null) {
                counts.logChange(who.uid(), "{} for uid {} (pid {})", reply.change(), who.uid(), who.pid());
            }
        }
        return new Answer(reply.text(), reply.change() != null);
    }
}
