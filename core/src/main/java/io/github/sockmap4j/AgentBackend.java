package io.github.sockmap4j;

import io.github.sockmap4j.linux.bpf.PolicyRule;
import io.github.sockmap4j.control.AgentClient;
import io.github.sockmap4j.control.AgentRule;
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

    private final AgentClient agent;
    private final String cause;
    private final Throwable causeException;

    AgentBackend(AgentClient agent, String cause, Throwable causeException) {
        this.agent = agent;
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
            return new Rule(AgentRule.request(agent, rule, boundBytes));
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
        try {
            agent.close(); // the agent removes this process's opt-ins
        } catch (IOException e) {
            LOG.debug("Closing the connection to the sockmap4j agent: {}", e.toString());
        }
    }

    /** A rule the agent holds for this process. */
    private record Rule(AgentRule rule) implements OptIn {
        @Override
        public int port() {
            return rule.rule().port();
        }

        @Override
        public boolean active() {
            return rule.active();
        }

        @Override
        public void setBound(int bytes) throws IOException {
            rule.setBound(bytes); // checked as its request is made
        }

        @Override
        public void close() {
            rule.close();
        }

        @Override
        public String toString() {
            return "OptIn[port=" + port() + ", active=" + active() + "]";
        }
    }
}
