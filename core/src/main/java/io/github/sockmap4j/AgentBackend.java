package io.github.sockmap4j;

import io.github.sockmap4j.linux.bpf.PolicyRule;
import io.github.sockmap4j.control.AgentClient;
import java.io.IOException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A process without the privileges for the kernel's objects whose pin directory a node agent
 * serves: opt-ins are requests to the agent, which holds each rule while this process's
 * connection to it lives. The kernel redirects this process's connections in the agent's cgroups,
 * but the process reads none of the maps, so it is never "active" (no stats, no acceleration
 * checks) and says why.
 */
final class AgentBackend implements Backend {
    private static final Logger LOG = LoggerFactory.getLogger(Sockmap.class);

    private final AgentHolds holds;
    private final String cause;
    private final Throwable causeException;

    AgentBackend(AgentClient agent, String cause, Throwable causeException) {
        this.holds = new AgentHolds(agent);
        this.cause = cause;
        this.causeException = causeException;
    }

    @Override
    public String cause() {
        return cause;
    }

    @Override
    public Throwable causeException() {
        return causeException;
    }

    @Override
    public OptIn optIn(PolicyRule rule, int boundBytes, boolean required) throws IOException {
        try {
            holds.hold(rule, boundBytes);
            return new HeldRule(holds, rule, () -> { });
        } catch (AgentClient.AgentRefusedException e) {
            if (required) {
                throw e;
            }
            // As for any missing prerequisite: plain TCP, and the reason in the log.
            LOG.warn("Port {} stays on plain TCP: {}", rule.port(), e.getMessage());
            return new OffBackend.NoRule(rule.port());
        }
    }

    @Override
    public void close() {
        holds.close(); // the agent removes this process's opt-ins
    }
}
