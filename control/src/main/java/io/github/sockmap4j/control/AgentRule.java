package io.github.sockmap4j.control;

import io.github.sockmap4j.linux.bpf.PolicyRule;
import java.io.IOException;

/**
 * A rule a node agent holds for as long as the connection of {@code agent} (made with OPTIN):
 * closing this handle asks the agent to remove it, and the agent removes it anyway when the
 * connection ends with its process.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
public final class AgentRule implements AutoCloseable {
    private final AgentClient agent;
    private final PolicyRule rule;
    private boolean closed;

    /** Asks the agent for {@code rule} with {@code bound} and returns its handle. */
    public static AgentRule request(AgentClient agent, PolicyRule rule, int bound) throws IOException {
        agent.call(new AgentRequest(AgentRequest.Verb.OPTIN, rule, bound));
        return new AgentRule(agent, rule);
    }

    AgentRule(AgentClient agent, PolicyRule rule) {
        this.agent = agent;
        this.rule = rule;
    }

    /** The rule held. */
    public PolicyRule rule() {
        return rule;
    }

    /** Whether this rule is still held (not closed). */
    public synchronized boolean active() {
        return !closed;
    }

    /** Asks the agent to change the rule's in-flight bound. */
    public void setBound(int bytes) throws IOException {
        agent.call(new AgentRequest(AgentRequest.Verb.BOUND, rule, bytes));
    }

    @Override
    public synchronized void close() {
        if (!closed) {
            closed = true;
            try {
                agent.call(new AgentRequest(AgentRequest.Verb.DENY, rule, 0));
            } catch (IOException ignored) {
                // An agent that is gone dropped the rule with the connection, or its successor will.
            }
        }
    }
}
