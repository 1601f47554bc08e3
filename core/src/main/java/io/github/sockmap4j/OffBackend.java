package io.github.sockmap4j;

import io.github.sockmap4j.linux.bpf.PolicyRule;

/**
 * Plain TCP: a prerequisite is missing, the fast path was turned off, or the process is exiting.
 * Opt-ins succeed and move nothing.
 *
 * @param cause          why, as the log and {@link Sockmap#unavailabilityCause()} say it
 * @param causeException what was thrown on the way, or null
 */
record OffBackend(String cause, Throwable causeException) implements Backend {

    @Override
    public OptIn optIn(PolicyRule rule, int boundBytes, boolean required) {
        return new NoRule(rule.port());
    }

    @Override
    public void close() {
    }

    /** An opt-in that holds nothing: its port stays on plain TCP. */
    record NoRule(int port) implements OptIn {
        @Override
        public boolean active() {
            return false;
        }

        @Override
        public void setBound(int bytes) {
            PolicyRule.checkBound(bytes);
        }

        @Override
        public void close() {
        }

        @Override
        public String toString() {
            return "OptIn[port=" + port + ", active=false]";
        }
    }
}
