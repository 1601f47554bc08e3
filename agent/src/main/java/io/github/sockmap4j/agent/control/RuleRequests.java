package io.github.sockmap4j.agent.control;

import io.github.sockmap4j.control.AgentRequest;
import io.github.sockmap4j.control.AgentRequest.Verb;
import java.io.IOException;
import java.util.List;
import java.util.Set;
import java.util.function.BiFunction;

/**
 * ALLOW, OPTIN, BOUND and DENY, and LIST: a rule is checked against the policy file
 * ({@link AgentPolicy}) and, for a bound, against other users' servers ({@link ForeignServers}),
 * then goes to the {@link RuleBook}, which holds it for its owner (within the owner's quota) and
 * writes the policy map. DENY removes a rule of the caller's own and is not checked further; LIST
 * shows the rules the caller may see.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
public final class RuleRequests implements RequestHandler {
    private final RuleBook book;
    private final AgentPolicy policy;
    /** The bound rule for users' servers; null: not checked. */
    private volatile ForeignServers foreignServers;

    public RuleRequests(RuleBook book, AgentPolicy policy) {
        this.book = book;
        this.policy = policy;
    }

    /**
     * From now on, a user's bound on a port another uid listens on is refused; {@code listeners}
     * gives who listens on a port, in the namespace of a requester's pid and those the agent watches.
     */
    public void checkListeners(BiFunction<Integer, Long, List<Listeners.Listener>> listeners) {
        foreignServers = new ForeignServers(listeners);
    }

    @Override
    public Set<Verb> verbs() {
        return Set.of(Verb.ALLOW, Verb.OPTIN, Verb.BOUND, Verb.DENY, Verb.LIST);
    }

    @Override
    public Reply handle(Request r) {
        AgentRequest ask = r.ask();
        if (ask.verb() == Verb.LIST) {
            return Reply.counted(book.describeFor(r.uid()));
        }
        if (ask.verb() != Verb.DENY) {
            String no = policy.refusal(r.uid(), r.who().groups(), ask);
            ForeignServers f = foreignServers;
            if (no == null && f != null) {
                no = f.refusal(r.uid(), r.who().pid(), ask);
            }
            if (no != null) {
                return Reply.refused(ControlCounts.Refusal.POLICY, no);
            }
        }
        try {
            return Reply.changed(book.apply(r.uid(), r.who().pid(), r.connection(), ask, policy.quota(r.uid())));
        } catch (RuleBook.Refused | IOException e) {
            return Reply.refused(ControlCounts.Refusal.BOOK, e.getMessage());
        }
    }
}
