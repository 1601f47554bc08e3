package io.github.sockmap4j;

import io.github.sockmap4j.linux.bpf.PolicyRule;
import java.io.IOException;

/**
 * One opt-in: a hold on a rule in {@code holds}, released once, at its close. {@code boundChanged}
 * runs after its bound changed (the kernel backend tells this process's credit engines).
 */
final class HeldRule implements OptIn {
    private final RuleHolds holds;
    private final PolicyRule rule;
    private final Runnable boundChanged;
    private boolean closed;

    HeldRule(RuleHolds holds, PolicyRule rule, Runnable boundChanged) {
        this.holds = holds;
        this.rule = rule;
        this.boundChanged = boundChanged;
    }

    @Override
    public int port() {
        return rule.port();
    }

    @Override
    public synchronized boolean active() {
        return !closed && holds.holds(rule);
    }

    @Override
    public synchronized void setBound(int bytes) throws IOException {
        PolicyRule.checkBound(bytes);
        if (!active()) {
            return;
        }
        holds.setBound(rule, bytes);
        boundChanged.run();
    }

    @Override
    public synchronized void close() {
        if (!closed) {
            closed = true;
            holds.release(rule);
        }
    }

    @Override
    public String toString() {
        return "OptIn[port=" + rule.port() + ", active=" + active() + "]";
    }
}
