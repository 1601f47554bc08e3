package io.github.sockmap4j;

import io.github.sockmap4j.internal.agent.AgentRule;
import io.github.sockmap4j.internal.bpf.KernelSockmap;
import io.github.sockmap4j.internal.bpf.PolicyRule;
import io.github.sockmap4j.internal.bpf.Rules;
import io.github.sockmap4j.internal.flow.FastPath;
import java.io.IOException;

/**
 * An {@link OptIn} of a {@link Sockmap}: one counted reference to a policy rule of its kernel
 * handle, a rule a node agent holds for this process, or nothing when the fast path was off.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
final class PolicyOptIn implements OptIn {
    private final Sockmap sockmap;
    private final PolicyRule rule;
    private final AgentRule agentRule;
    private final int port;
    private boolean closed;

    PolicyOptIn(Sockmap sockmap, PolicyRule rule, AgentRule agentRule, int port) {
        this.sockmap = sockmap;
        this.rule = rule;
        this.agentRule = agentRule;
        this.port = port;
    }

    @Override
    public int port() {
        return port;
    }

    @Override
    public synchronized boolean active() {
        if (agentRule != null) {
            return agentRule.active();
        }
        return rule != null && !closed && sockmap.fastPath() != null;
    }

    @Override
    public synchronized void setBound(int bytes) throws IOException {
        Rules.checkBound(bytes);
        if (agentRule != null) {
            agentRule.setBound(bytes);
            return;
        }
        FastPath fp = sockmap.fastPath();
        if (!active() || fp == null) {
            return;
        }
        fp.kernel().setPolicyBound(rule, bytes);
        fp.boundChanged(port);
    }

    @Override
    public synchronized void close() {
        if (agentRule != null) {
            agentRule.close();
        }
        KernelSockmap kernel = sockmap.kernelHandle();
        if (!closed && rule != null && kernel != null) {
            kernel.optOut(rule);
        }
        closed = true;
    }

    @Override
    public String toString() {
        return "OptIn[port=" + port + ", active=" + active() + "]";
    }
}
