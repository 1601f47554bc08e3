package io.github.sockmap4j;

import io.github.sockmap4j.control.AgentClient;
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
 * and the cgroup attachment. Opt-ins write policy rules (through the node agent while one serves
 * the pins); channels of this process use
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
    private final RuleHolds kernelHolds = new KernelHolds();
    /** Where a node agent of these pins listens (it may start after this process). */
    private final Path agentSocket;
    /** Guarded by this. */
    private AgentHolds agentHolds;

    KernelBackend(KernelSockmap kernel, boolean credit, Fionread fionread, String outside, Path agentSocket) {
        this.agentSocket = agentSocket;
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

    /**
     * Opts {@code rule} in: through the node agent while one serves these pins (it is then the
     * policy map's one writer, and a rule it holds for others stays when this process lets go of
     * its own hold), else straight into the map, counted in this process.
     */
    @Override
    public OptIn optIn(PolicyRule rule, int boundBytes, boolean required) throws IOException {
        Runnable boundChanged = () -> fastPath.boundChanged(rule.port());
        AgentHolds agent = agent();
        if (agent != null) {
            try {
                agent.hold(rule, boundBytes);
                return new HeldRule(agent, rule, boundChanged);
            } catch (AgentClient.AgentRefusedException e) {
                throw e;
            } catch (IOException broken) {
                // The agent went away (or restarted): the map is this process's to write again, and
                // a later opt-in asks whichever agent listens then.
                LOG.warn("The sockmap4j agent of {} did not answer ({}); port {} is opted in directly",
                        kernel.pinDir(), broken.getMessage(), rule.port());
                forget(agent);
            }
        }
        kernel.optIn(rule, boundBytes);
        return new HeldRule(kernelHolds, rule, boundChanged);
    }

    /**
     * The agent's holds for this process, connected at the first opt-in that finds an agent
     * listening at {@link #agentSocket}; null while none does.
     */
    private synchronized AgentHolds agent() throws IOException {
        if (agentHolds == null && !closed) {
            AgentClient client = AgentClient.connectIfRunning(agentSocket);
            if (client != null) {
                agentHolds = new AgentHolds(client);
            }
        }
        return agentHolds;
    }

    private synchronized void forget(AgentHolds broken) {
        if (agentHolds == broken) {
            agentHolds = null;
        }
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
        synchronized (this) {
            if (agentHolds != null) {
                agentHolds.close(); // the agent drops what it held for this process
            }
        }
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

    /** This process's counted rules in the kernel's policy map (KernelSockmap counts them). */
    private final class KernelHolds implements RuleHolds {
        @Override
        public void setBound(PolicyRule rule, int bytes) throws IOException {
            kernel.setPolicyBound(rule, bytes);
        }

        @Override
        public void release(PolicyRule rule) {
            kernel.optOut(rule);
        }

        @Override
        public boolean holds(PolicyRule rule) {
            return !closed;
        }
    }
}
