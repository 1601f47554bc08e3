package io.github.sockmap4j;

import io.github.sockmap4j.linux.bpf.PolicyRule;
import java.io.IOException;

/**
 * Who keeps this process's opt-ins, counted per rule: the kernel's objects open here
 * ({@code KernelSockmap}'s counted rules), or a node agent that holds them for this process
 * ({@link AgentHolds}). One {@link HeldRule} adapts either to an {@link OptIn}.
 */
interface RuleHolds {
    /** Replaces the bound of a rule held here. */
    void setBound(PolicyRule rule, int bytes) throws IOException;

    /** Releases one hold of {@code rule}; the last one removes it. */
    void release(PolicyRule rule);

    /** Whether {@code rule} is held here now (false once the holder closed). */
    boolean holds(PolicyRule rule);
}
