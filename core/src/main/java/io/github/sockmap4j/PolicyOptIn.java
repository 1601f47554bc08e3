package io.github.sockmap4j;

import io.github.sockmap4j.internal.bpf.PolicyRule;
import java.io.IOException;

/**
 * An {@link OptIn} of a {@link Sockmap}: one counted reference to a policy rule of its kernel
 * handle, or nothing when the fast path was off.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
final class PolicyOptIn implements OptIn {
    private final Sockmap sockmap;
    private final PolicyRule rule;
    private final int port;
    private boolean closed;

    PolicyOptIn(Sockmap sockmap, PolicyRule rule, int port) {
        this.sockmap = sockmap;
        this.rule = rule;
        this.port = port;
    }

    @Override
    public int port() {
        return port;
    }

    @Override
    public synchronized boolean active() {
        return rule != null && !closed && sockmap.kernelOpen();
    }

    @Override
    public synchronized void setBound(int bytes) throws IOException {
        Rules.checkBound(bytes);
        if (!active()) {
            return;
        }
        sockmap.kernel().setPolicyBound(rule, bytes);
        sockmap.boundChanged(port);
    }

    @Override
    public synchronized void close() {
        if (!closed && rule != null && sockmap.kernel() != null) {
            sockmap.kernel().optOut(rule);
        }
        closed = true;
    }

    @Override
    public String toString() {
        return "OptIn[port=" + port + ", active=" + active() + "]";
    }
}
