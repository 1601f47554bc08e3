package io.github.sockmap4j;

import io.github.sockmap4j.control.AgentClient;
import io.github.sockmap4j.control.AgentRule;
import io.github.sockmap4j.linux.bpf.PolicyRule;
import java.io.IOException;
import java.util.HashMap;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The rules a node agent holds for this process, counted here: the agent holds a rule once for a
 * connection, so the same rule opted in twice in one process is asked for once and released at
 * its last close, as the kernel's own counted rules are ({@code KernelSockmap}). A rule's bound is
 * replaced when an opt-in gives one. Closing this releases them all: the agent drops a
 * connection's rules when it ends.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
final class AgentHolds implements RuleHolds {
    private static final Logger LOG = LoggerFactory.getLogger(Sockmap.class);

    private final AgentClient agent;
    private final Map<PolicyRule, Held> held = new HashMap<>();

    private static final class Held {
        final AgentRule rule;
        int count;

        Held(AgentRule rule) {
            this.rule = rule;
        }
    }

    AgentHolds(AgentClient agent) {
        this.agent = agent;
    }

    /**
     * Holds {@code rule} once more, asking the agent the first time (or for the new bound).
     *
     * @throws AgentClient.AgentRefusedException with the agent's reason when it refused
     * @throws IOException when the connection to the agent broke
     */
    synchronized void hold(PolicyRule rule, int bound) throws IOException {
        Held h = held.get(rule);
        if (h == null) {
            h = new Held(AgentRule.request(agent, rule, bound));
            held.put(rule, h);
        } else if (bound != 0) {
            h.rule.setBound(bound);
        }
        h.count++;
    }

    @Override
    public synchronized void setBound(PolicyRule rule, int bytes) throws IOException {
        Held h = held.get(rule);
        if (h != null) {
            h.rule.setBound(bytes);
        }
    }

    @Override
    public synchronized void release(PolicyRule rule) {
        Held h = held.get(rule);
        if (h != null && --h.count == 0) {
            held.remove(rule);
            h.rule.close();
        }
    }

    @Override
    public synchronized boolean holds(PolicyRule rule) {
        Held h = held.get(rule);
        return h != null && h.rule.active();
    }

    /** Ends the connection to the agent, which drops every rule it held for it. */
    void close() {
        held.clear();
        try {
            agent.close();
        } catch (IOException e) {
            LOG.debug("Closing the connection to the sockmap4j agent: {}", e.toString());
        }
    }
}
