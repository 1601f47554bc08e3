package io.github.sockmap4j.linux.bpf;

import io.github.sockmap4j.linux.ffi.Errno;
import io.github.sockmap4j.linux.ffi.Libbpf;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.nio.file.Path;

/**
 * The {@code sm4j_policy} LPM trie: which server endpoints are opted in, and each one's
 * in-flight bound. Opened with the other pins by {@link KernelSockmap}, or alone from its pin
 * ({@link #open}) by a process that may write nothing else.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
public final class PolicyMap implements AutoCloseable {
    private final BpfMap map;

    PolicyMap(Libbpf bpf, int fd) {
        this.map = BpfMap.of(bpf, Pin.POLICY.fileName, fd, PolicyKeyLayout.LAYOUT.byteSize());
    }

    /**
     * The policy map alone, opened from its pin: what a process without CAP_BPF may use when
     * the pin file lets it write (see {@code PolicyClient}).
     */
    public static PolicyMap open(Libbpf bpf, Path pinDir) throws IOException {
        String path = Pin.POLICY.path(pinDir);
        int fd = bpf.tryGetPinned(path);
        if (fd < 0) {
            String why = -fd == Errno.ENOENT ? "no fast path is set up there (start the agent, or any privileged "
                    + "sockmap4j process, with this pin directory)"
                    : -fd == Errno.EACCES || -fd == Errno.EPERM ? "this user may not write it: the owner of the pins "
                    + "must grant its group (PolicyClient.grant)" : "";
            throw Errno.error("bpf_obj_get", fd, path + ": " + why);
        }
        return new PolicyMap(bpf, fd);
    }

    /** Adds (or replaces) a rule with each receiver's bound. */
    public synchronized PolicyRule add(PolicyRule rule) throws IOException {
        put(rule, 0);
        return rule;
    }

    /** Adds or replaces a rule with its bound (0: each receiver's). */
    public synchronized void put(PolicyRule rule, int bound) throws IOException {
        int r = update(rule, bound, Libbpf.BPF_ANY);
        if (r < 0) {
            throw Errno.error("bpf_map_update_elem(" + Pin.POLICY.fileName + ")", r,
                    -r == Errno.ENOSPC || -r == Errno.E2BIG
                            ? "the policy map is full (65,536 rules): deny rules no longer needed"
                            : "port " + rule.port());
        }
    }

    /** Replaces the bound of an existing rule. */
    public synchronized void setBound(PolicyRule rule, int bound) throws IOException {
        int r = update(rule, bound, Libbpf.BPF_EXIST);
        if (r < 0) {
            throw Errno.error("bpf_map_update_elem(" + Pin.POLICY.fileName + ")", r, "port " + rule.port());
        }
    }

    private int update(PolicyRule rule, int bound, long flags) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment key = arena.allocateFrom(ValueLayout.JAVA_BYTE, rule.key());
            MemorySegment val = arena.allocate(PolicyKeyLayout.VALUE);
            val.set(ValueLayout.JAVA_INT, PolicyKeyLayout.BOUND, bound);
            return map.tryUpdate(key, val, flags);
        }
    }

    /**
     * The bound of the entry matching this server endpoint, as the unsigned 32-bit value the
     * kernel holds: -1 when none matches, 0 when it leaves the bound to the receiver,
     * {@link PolicyKeyLayout#UNBOUNDED} when it turns the bound off.
     */
    public synchronized long boundFor(InetAddress server, int port) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment key = arena.allocateFrom(ValueLayout.JAVA_BYTE,
                    PolicyRule.of(port, server, server instanceof java.net.Inet4Address ? 32 : 128).key());
            MemorySegment val = arena.allocate(PolicyKeyLayout.VALUE);
            return map.lookup(key, val)
                    ? Integer.toUnsignedLong(val.get(ValueLayout.JAVA_INT, PolicyKeyLayout.BOUND)) : -1;
        }
    }

    /** Every rule in the map. */
    public synchronized java.util.List<PolicyRule> rules() {
        java.util.List<PolicyRule> out = new java.util.ArrayList<>();
        map.forEachKey(k -> out.add(PolicyKeyLayout.read(k)));
        return out;
    }

    /**
     * The bound stored with a rule, or -1 when it is not in the map.
     * One lookup: an LPM lookup with the rule's own prefix length returns the longest entry no
     * longer than it, which is that rule.
     */
    public synchronized long boundOf(PolicyRule rule) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment key = arena.allocateFrom(ValueLayout.JAVA_BYTE, rule.key());
            MemorySegment val = arena.allocate(PolicyKeyLayout.VALUE);
            return map.lookup(key, val)
                    ? Integer.toUnsignedLong(val.get(ValueLayout.JAVA_INT, PolicyKeyLayout.BOUND)) : -1;
        }
    }

    public synchronized void remove(PolicyRule rule) {
        tryRemove(rule);
    }

    /** Removes a rule; 0 or {@code -errno} (ENOENT when it was not there). */
    public synchronized int tryRemove(PolicyRule rule) {
        try (Arena arena = Arena.ofConfined()) {
            return map.tryDelete(arena.allocateFrom(ValueLayout.JAVA_BYTE, rule.key()));
        }
    }

    @Override
    public synchronized void close() {
        map.close();
    }
}
