package io.github.sockmap4j;

import io.github.sockmap4j.internal.agent.AgentClient;
import io.github.sockmap4j.internal.agent.AgentRequest;
import java.io.IOException;
import java.net.InetAddress;

/**
 * A rule a node agent holds for as long as the connection of {@code agent} (made with OPTIN):
 * closing this handle asks the agent to remove it, and the agent removes it anyway when the
 * connection ends with its process.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
final class AgentOptIn implements OptIn {
    private final AgentClient agent;
    private final int port;
    private final InetAddress network;
    private final int bits;
    private boolean closed;

    /** Asks the agent for the rule ({@code bits}: the policy key's) and returns its handle. */
    static AgentOptIn request(AgentClient agent, int port, InetAddress network, int bits, int bound)
            throws IOException {
        agent.call(new AgentRequest(AgentRequest.Verb.OPTIN, port, network, bits, bound));
        return new AgentOptIn(agent, port, network, bits);
    }

    AgentOptIn(AgentClient agent, int port, InetAddress network, int bits) {
        this.agent = agent;
        this.port = port;
        this.network = network;
        this.bits = bits;
    }

    @Override
    public int port() {
        return port;
    }

    @Override
    public synchronized boolean active() {
        return !closed;
    }

    @Override
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
