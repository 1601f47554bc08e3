package io.github.sockmap4j.linux.bpf;

import io.github.sockmap4j.linux.ffi.Errno;
import io.github.sockmap4j.linux.ffi.Libbpf;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.nio.file.Path;
import java.util.HexFormat;

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

    public synchronized PolicyRule add(int port, InetAddress network, int bits) throws IOException {
        PolicyRule rule = rule(port, network, bits);
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
            MemorySegment key = arena.allocateFrom(ValueLayout.JAVA_BYTE, HexFormat.of().parseHex(rule.prefixHex()));
            MemorySegment val = arena.allocate(PolicyKeyLayout.VALUE);
            val.set(ValueLayout.JAVA_INT, PolicyKeyLayout.BOUND, bound);
            return map.tryUpdate(key, val, flags);
        }
    }

    /** The rule for these arguments, as {@link #add} would make it (nothing is written). */
    public PolicyRule rule(int port, InetAddress network, int bits) {
        byte[] addr = network == null ? new byte[16] : SockKeyLayout.mapped(network);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment key = arena.allocate(PolicyKeyLayout.LAYOUT);
            PolicyKeyLayout.fill(key, port, addr, bits);
            return new PolicyRule(port, HexFormat.of().formatHex(key.toArray(ValueLayout.JAVA_BYTE)), bits);
        }
    }

    /**
     * The bound of the entry matching this server endpoint, as the unsigned 32-bit value the
     * kernel holds: -1 when none matches, 0 when it leaves the bound to the receiver,
     * {@link PolicyKeyLayout#UNBOUNDED} when it turns the bound off.
     */
    public synchronized long boundFor(InetAddress server, int port) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment key = arena.allocate(PolicyKeyLayout.LAYOUT);
            PolicyKeyLayout.fill(key, port, SockKeyLayout.mapped(server), 128);
            MemorySegment val = arena.allocate(PolicyKeyLayout.VALUE);
            return map.lookup(key, val)
                    ? Integer.toUnsignedLong(val.get(ValueLayout.JAVA_INT, PolicyKeyLayout.BOUND)) : -1;
        }
    }

    /** The keys (in hex, as {@link PolicyRule#prefixHex}) of every rule in the map. */
    public synchronized java.util.List<String> keysHex() {
        java.util.List<String> out = new java.util.ArrayList<>();
        map.forEachKey(k -> out.add(HexFormat.of().formatHex(k.toArray(ValueLayout.JAVA_BYTE))));
        return out;
    }

    /**
     * The bound stored with a rule whose key is in the map (as {@link #keysHex} lists them), or -1.
     * One lookup: an LPM lookup with the rule's own prefix length returns the longest entry no
     * longer than it, which is that rule.
     */
    public synchronized long boundOf(PolicyRule rule) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment key = arena.allocateFrom(ValueLayout.JAVA_BYTE, HexFormat.of().parseHex(rule.prefixHex()));
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
            return map.tryDelete(arena.allocateFrom(ValueLayout.JAVA_BYTE, HexFormat.of().parseHex(rule.prefixHex())));
        }
    }

    @Override
    public synchronized void close() {
        map.close();
    }
}
