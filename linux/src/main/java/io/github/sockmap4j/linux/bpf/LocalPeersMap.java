package io.github.sockmap4j.linux.bpf;

import io.github.sockmap4j.linux.ffi.Libbpf;
import io.github.sockmap4j.linux.ffi.NativeIOException;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * The pinned {@code sm4j_local} map: this node's address prefixes, where a registered socket's
 * server may be. A connect to a server at an address outside them is not registered (its sends
 * would only miss). Created holding ::/0, every address.
 *
 * <pre>
 * struct sm4j_local_key { __u32 prefixlen; __u8 addr[16]; };   // IPv4 v4-mapped; value: __u8
 * </pre>
 *
 * <p><b>Note:</b> not threadsafe: one writer at a time.
 */
public final class LocalPeersMap implements AutoCloseable {
    public static final StructLayout KEY = MemoryLayout.structLayout(
            ValueLayout.JAVA_INT.withName("prefixlen"),
            MemoryLayout.sequenceLayout(16, ValueLayout.JAVA_BYTE).withName("addr")).withName("sm4j_local_key");

    /** A prefix as the map holds it: v4 prefixes as their v4 address and bits. */
    public record Prefix(InetAddress address, int bits) {
    }

    private final BpfMap map;

    private LocalPeersMap(BpfMap map) {
        this.map = map;
    }

    /** The local peers of {@code pinDir}; throws naming the pin when there is none. */
    public static LocalPeersMap open(Libbpf bpf, Path pinDir) throws IOException {
        return new LocalPeersMap(BpfMap.open(bpf, Pin.LOCAL, pinDir, KEY.byteSize()));
    }

    /** Puts ::/0 (every address) into the map of descriptor {@code fd} (the caller's): how the pins start. */
    static void allowEverywhere(Libbpf bpf, int fd) throws NativeIOException {
        BpfMap local = BpfMap.of(bpf, Pin.LOCAL.fileName, fd, KEY.byteSize()); // not closed: fd is the caller's
        try (Arena arena = Arena.ofConfined()) {
            local.update(arena.allocate(KEY), arena.allocate(ValueLayout.JAVA_BYTE), Libbpf.BPF_ANY, "::/0");
        }
    }

    /** Every prefix in the map. */
    public List<Prefix> list() throws UnknownHostException {
        List<Prefix> out = new ArrayList<>();
        UnknownHostException[] bad = {null};
        map.forEachKey(k -> {
            try {
                out.add(prefixOf(k));
            } catch (UnknownHostException e) {
                bad[0] = e; // 16 bytes are always an address
            }
        });
        if (bad[0] != null) {
            throw bad[0];
        }
        return out;
    }

    /**
     * Makes the map hold exactly {@code prefixes}: the new ones added first, then those no longer
     * listed removed, so that an address listed before and after is never missing in between.
     */
    public void replace(Set<Prefix> prefixes) throws IOException {
        Set<Prefix> wanted = new HashSet<>();
        for (Prefix p : prefixes) {
            wanted.add(normalized(p));
        }
        Set<Prefix> had = new HashSet<>(list());
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment k = arena.allocate(KEY);
            MemorySegment v = arena.allocate(ValueLayout.JAVA_BYTE);
            for (Prefix p : wanted) {
                if (!had.contains(p)) {
                    fill(k, p);
                    map.update(k, v, Libbpf.BPF_ANY, p.address().getHostAddress() + "/" + p.bits());
                }
            }
            for (Prefix p : had) {
                if (!wanted.contains(p)) {
                    fill(k, p);
                    map.tryDelete(k);
                }
            }
        }
    }

    /** The prefix with its host bits cleared, as the trie keeps it. */
    static Prefix normalized(Prefix p) {
        byte[] a = p.address().getAddress();
        int bits = p.bits();
        if (bits < 0 || bits > a.length * 8) {
            throw new IllegalArgumentException("prefix length " + bits + " out of range for " + p.address());
        }
        for (int i = 0; i < a.length; i++) {
            int keep = Math.max(0, Math.min(8, bits - i * 8));
            a[i] &= (byte) (0xff << (8 - keep));
        }
        try {
            return new Prefix(InetAddress.getByAddress(a), bits);
        } catch (UnknownHostException e) {
            throw new IllegalArgumentException(e);
        }
    }

    private static void fill(MemorySegment k, Prefix p) {
        boolean v4 = p.address() instanceof Inet4Address;
        k.set(ValueLayout.JAVA_INT, 0, v4 ? 96 + p.bits() : p.bits());
        MemorySegment.copy(SockKeyLayout.mapped(p.address()), 0, k, ValueLayout.JAVA_BYTE, 4, 16);
    }

    private static Prefix prefixOf(MemorySegment k) throws UnknownHostException {
        int bits = k.get(ValueLayout.JAVA_INT, 0);
        byte[] a = k.asSlice(4, 16).toArray(ValueLayout.JAVA_BYTE);
        boolean mapped = bits >= 96;
        for (int i = 0; i < 10 && mapped; i++) {
            mapped = a[i] == 0;
        }
        mapped &= a[10] == (byte) 0xff && a[11] == (byte) 0xff;
        if (mapped) {
            return new Prefix(InetAddress.getByAddress(java.util.Arrays.copyOfRange(a, 12, 16)), bits - 96);
        }
        return new Prefix(InetAddress.getByAddress(a), bits);
    }

    @Override
    public void close() {
        map.close();
    }
}
