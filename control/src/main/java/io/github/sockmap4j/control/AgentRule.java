package io.github.sockmap4j.control;

import io.github.sockmap4j.linux.bpf.Rules;
import java.io.IOException;
import java.net.InetAddress;

/**
 * A rule a node agent holds for as long as the connection of {@code agent} (made with OPTIN):
 * closing this handle asks the agent to remove it, and the agent removes it anyway when the
 * connection ends with its process.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
public final class AgentRule implements AutoCloseable {
    private final AgentClient agent;
    private final int port;
    private final InetAddress network;
    private final int bits;
    private boolean closed;

    /** Asks the agent for the rule ({@code bits}: the policy key's) and returns its handle. */
    public static AgentRule request(AgentClient agent, int port, InetAddress network, int bits, int bound)
            throws IOException {
        agent.call(new AgentRequest(AgentRequest.Verb.OPTIN, port, network, bits, bound));
        return new AgentRule(agent, port, network, bits);
    }

    AgentRule(AgentClient agent, int port, InetAddress network, int bits) {
        this.agent = agent;
        this.port = port;
        this.network = network;
        this.bits = bits;
    }

    /** Whether this rule is still held (not closed). */
    public synchronized boolean active() {
        return !closed;
    }

    /** Asks the agent to change the rule's in-flight bound. */
    public void setBound(int bytes) throws IOException {
        Rules.checkBound(bytes);
        agent.call(new AgentRequest(AgentRequest.Verb.BOUND, port, network, bits, bytes));
    }

    @Override
    public synchronized void close() {
        if (!closed) {
            closed = true;
            try {
                agent.call(new AgentRequest(AgentRequest.Verb.DENY, port, network, bits, 0));
            } catch (IOException ignored) {
                // An agent that is gone dropped the rule with the connection, or its successor will.
            }
        }
    }
}
