package io.github.sockmap4j;

import io.github.sockmap4j.internal.flow.FastPath;
import io.github.sockmap4j.internal.jfr.FastPathStateEvent;
import io.github.sockmap4j.linux.bpf.KernelSockmap;
import io.github.sockmap4j.linux.bpf.PolicyRule;
import io.github.sockmap4j.linux.ffi.Libbpf;
import java.io.IOException;
import java.nio.file.Path;
import java.util.Optional;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The kernel's objects open in this process: the pinned maps and programs of one pin directory
 * and the cgroup attachment. Opt-ins write policy rules; channels of this process use
 * {@link #fastPath()} while it is open.
 */
final class KernelBackend implements Backend {
    private static final Logger LOG = LoggerFactory.getLogger(Sockmap.class);

    private final KernelSockmap kernel;
    private final FastPath fastPath;
    private final Fionread fionread;
    /** Why this process's own sockets are not covered, null when they are. */
    private final String outside;
    private volatile boolean closed;

    KernelBackend(KernelSockmap kernel, boolean credit, Fionread fionread, String outside) {
        this.kernel = kernel;
        this.fastPath = new FastPath(kernel, credit);
        this.fionread = fionread;
        this.outside = outside;
    }

    @Override
    public FastPath fastPath() {
        return closed ? null : fastPath;
    }

    @Override
    public boolean coversThisProcess() {
        return !closed && outside == null;
    }

    @Override
    public String cause() {
        return outside;
    }

    @Override
    public String coverageProblem() {
        return closed ? null : outside;
    }

    @Override
    public Fionread fionread() {
        return fionread;
    }

    @Override
    public Optional<Path> cgroup() {
        return closed ? Optional.empty() : Optional.of(kernel.cgroupDir());
    }

    @Override
    public OptIn optIn(PolicyRule rule, int boundBytes, boolean required) throws IOException {
        return new Rule(this, kernel.optIn(rule, boundBytes));
    }

    @Override
    public SockmapStats stats() {
        return closed ? SockmapStats.EMPTY : SockmapStats.of(kernel.counters(), kernel.registeredSockets());
    }

    @Override
    public long verdictRunCount() {
        if (closed) {
            return -1;
        }
        try {
            return Libbpf.load().progRuns(kernel.redirectProgramFd()).runCount();
        } catch (IOException e) {
            return -1;
        }
    }

    @Override
    public void close() {
        closed = true;
        FastPathStateEvent.emit(false, "closed", kernel.pinDir().toString(), kernel.cgroupDir().toString());
        try {
            fastPath.close();
        } catch (IOException e) {
            LOG.warn("Closing the sockmap4j kernel objects in {}: {}", kernel.pinDir(), e.getMessage());
        }
    }

    @Override
    public String toString() {
        return "pins=" + kernel.pinDir() + ", cgroup=" + kernel.cgroupDir();
    }

    /** One counted reference to a policy rule of the kernel objects. */
    private static final class Rule implements OptIn {
        private final KernelBackend backend;
        private final PolicyRule rule;
        private boolean closed;

        Rule(KernelBackend backend, PolicyRule rule) {
            this.backend = backend;
            this.rule = rule;
        }

        @Override
        public int port() {
            return rule.port();
        }

        @Override
        public synchronized boolean active() {
            return !closed && !backend.closed;
        }

        @Override
        public synchronized void setBound(int bytes) throws IOException {
            PolicyRule.checkBound(bytes);
            if (!active()) {
                return;
            }
            backend.kernel.setPolicyBound(rule, bytes);
            backend.fastPath.boundChanged(rule.port());
        }

        @Override
        public synchronized void close() {
            if (!closed) {
                backend.kernel.optOut(rule);
            }
            closed = true;
        }

        @Override
        public String toString() {
            return "OptIn[port=" + rule.port() + ", active=" + active() + "]";
        }
    }
}
