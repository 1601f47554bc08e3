package io.github.sockmap4j;

import io.github.sockmap4j.internal.flow.FastPath;
import java.io.IOException;
import io.github.sockmap4j.linux.bpf.PolicyRule;
import java.nio.file.Path;
import java.util.Optional;

/**
 * What a {@link Sockmap} is in one of its three modes, chosen once when it opens: the kernel's
 * objects open in this process ({@link KernelBackend}), a node agent that opts in for a process
 * without privileges ({@link AgentBackend}), or plain TCP ({@link OffBackend}). {@code Sockmap}
 * delegates to it and makes no choice of its own.
 *
 * <p><b>Note:</b> implementations are threadsafe.
 */
sealed interface Backend permits KernelBackend, AgentBackend, OffBackend {

    /** The kernel side as channels use it: null unless this mode has it open. */
    default FastPath fastPath() {
        return null;
    }

    /**
     * Whether this process's own connections are redirected: the kernel's objects are open here
     * and the process is in the attached cgroup.
     */
    default boolean coversThisProcess() {
        return false;
    }

    /** Why this process's connections are not redirected, or null when they are. */
    String cause();

    /** The exception behind {@link #cause()}, if any. */
    default Throwable causeException() {
        return null;
    }

    /** Why the kernel objects open here do not cover this process, or null (also when none are open). */
    default String coverageProblem() {
        return null;
    }

    /** What the start-up probe found FIONREAD to count. */
    default Fionread fionread() {
        return Fionread.NOT_PROBED;
    }

    /** The attached cgroup, while the kernel side is open here. */
    default Optional<Path> cgroup() {
        return Optional.empty();
    }

    /** Opts {@code rule} in with a bound checked already; {@code required} is the configuration's. */
    OptIn optIn(PolicyRule rule, int boundBytes, boolean required) throws IOException;

    /** The kernel's counters; zeros where this process cannot read them. */
    default SockmapStats stats() {
        return SockmapStats.EMPTY;
    }

    /** Runs of the verdict program, or -1 where this process cannot read them. */
    default long verdictRunCount() {
        return -1;
    }

    /** Ends this process's use of the mode; called once. */
    void close();
}
