package io.github.sockmap4j.agent.control;

import io.github.sockmap4j.control.AgentRequest;
import io.github.sockmap4j.control.AgentRequest.Verb;
import java.io.IOException;
import java.util.Set;

/**
 * SERVICE, UNSERVICE and SERVICES: a Service is checked against the policy file (its caller may
 * set a bound on each local endpoint), then put through the {@link ServiceBook}, which holds it
 * for its owner (within the owner's quota, a loopback address in the caller's namespace) and
 * writes the Service map; UNSERVICE removes one of the caller's own; SERVICES shows those the
 * caller may see. While another writer owns the Service map ({@link #refuseServices}), SERVICE
 * and UNSERVICE are refused to everyone.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
public final class ServiceRequests implements RequestHandler {
    private final ServiceBook services;
    private final AgentPolicy policy;
    /** Why SERVICE and UNSERVICE are refused to everyone now (another writer owns the map), or null. */
    private volatile String ownedBy;

    public ServiceRequests(ServiceBook services, AgentPolicy policy) {
        this.services = java.util.Objects.requireNonNull(services, "services");
        this.policy = policy;
    }

    /**
     * From now on SERVICE and UNSERVICE are refused, to root too, saying {@code why}: another
     * writer owns the Service map (the Kubernetes feed), and would undo them.
     */
    public void refuseServices(String why) {
        ownedBy = why;
    }

    @Override
    public Set<Verb> verbs() {
        return Set.of(Verb.SERVICE, Verb.UNSERVICE, Verb.SERVICES);
    }

    @Override
    public Reply handle(Request r) {
        AgentRequest ask = r.ask();
        try {
            if (ask.verb() == Verb.SERVICES) {
                return Reply.counted(services.describeFor(r.uid()));
            }
            String owned = ownedBy;
            if (owned != null) {
                return Reply.refused(ControlCounts.Refusal.BOOK, owned);
            }
            if (ask.verb() == Verb.UNSERVICE) {
                return Reply.changed(services.remove(r.uid(), r.who().pid(), ask.service().vip()));
            }
            String no = policy.serviceRefusal(r.uid(), r.who().groups(), ask.service());
            if (no != null) {
                return Reply.refused(ControlCounts.Refusal.POLICY, no);
            }
            return Reply.changed(services.put(r.uid(), r.who().pid(), ask.service(), policy.quota(r.uid())));
        } catch (RuleBook.Refused | IOException e) {
            return Reply.refused(ControlCounts.Refusal.BOOK, e.getMessage());
        }
    }
}
