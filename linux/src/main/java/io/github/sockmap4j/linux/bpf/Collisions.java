package io.github.sockmap4j.linux.bpf;

import io.github.sockmap4j.linux.ffi.LibC;
import io.github.sockmap4j.linux.ffi.Libbpf;
import io.github.sockmap4j.linux.ffi.Linux;
import io.github.sockmap4j.linux.ffi.NativeIOException;
import io.github.sockmap4j.linux.ffi.ProgQuery;
import io.github.sockmap4j.linux.ffi.SysCalls;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.stream.Stream;

/**
 * Another program that puts the same sockets in a sockmap of its own (an observability agent's
 * context propagation, another accelerator): the kernel gives a socket one sk_msg program, so
 * whichever registers a socket first keeps it, and the other's insert fails. The programs record
 * each socket of an opted-in port that another map held ({@code sm4j_busy}); this says which
 * sockets, and which other sock_ops programs run for the cgroups.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
public final class Collisions {
    private Collisions() {
    }

    /** A socket another program's sockmap held: its addresses, its cookie, when (CLOCK_MONOTONIC ns). */
    public record BusySocket(String local, String remote, long cookie, long whenNanos) {
        @Override
        public String toString() {
            return local + " -> " + remote + " (socket cookie " + cookie + ")";
        }
    }

    /** The sockets of {@code pinDir}'s programs that another sockmap held, most recent first. */
    public static List<BusySocket> busySockets(Libbpf bpf, Path pinDir) throws IOException {
        int fd = Pin.BUSY.open(bpf, pinDir);
        List<BusySocket> out = new ArrayList<>();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment k = arena.allocate(SockKeyLayout.LAYOUT);
            MemorySegment next = arena.allocate(SockKeyLayout.LAYOUT);
            MemorySegment v = arena.allocate(16);
            MemorySegment prev = MemorySegment.NULL;
            while (bpf.tryMapNextKey(fd, prev, next) == 0) {
                MemorySegment.copy(next, 0, k, 0, k.byteSize());
                prev = k;
                if (bpf.tryMapLookup(fd, k, v) == 0) {
                    out.add(new BusySocket(endpoint(k, SockKeyLayout.LOCAL_IP, SockKeyLayout.LOCAL_PORT),
                            endpoint(k, SockKeyLayout.REMOTE_IP, SockKeyLayout.REMOTE_PORT),
                            v.get(ValueLayout.JAVA_LONG, 0), v.get(ValueLayout.JAVA_LONG, 8)));
                }
            }
        } finally {
            LibC.close(fd);
        }
        out.sort(Comparator.comparingLong(BusySocket::whenNanos).reversed());
        return out;
    }

    private static String endpoint(MemorySegment key, long ip, long port) throws IOException {
        InetAddress a = InetAddress.getByAddress(key.asSlice(ip, 16).toArray(ValueLayout.JAVA_BYTE));
        String host = a.getHostAddress();
        return (host.contains(":") ? "[" + host + "]" : host) + ":" + key.get(ValueLayout.JAVA_INT, port);
    }

    /**
     * The sock_ops programs other than {@code pinDir}'s that run for sockets of {@code cgroup}:
     * attached to it, to an ancestor, or to a cgroup below it, as "id N 'NAME' on CGROUP".
     */
    public static List<String> otherSockopsPrograms(Libbpf bpf, Path pinDir, Path cgroup) throws IOException {
        ProgQuery q = new ProgQuery(bpf);
        int own = Pin.SOCKOPS.open(bpf, pinDir);
        int ownId;
        try {
            ownId = q.ofFd(own).id();
        } finally {
            LibC.close(own);
        }
        Set<String> out = new LinkedHashSet<>();
        // The cgroup's own and its ancestors' (effective), then each cgroup below it (its own only).
        addOthers(q, cgroup, ProgQuery.BPF_F_QUERY_EFFECTIVE, ownId, out, "it or an ancestor");
        try (Stream<Path> below = Files.walk(cgroup)) {
            for (Path dir : below.filter(Files::isDirectory).filter(d -> !d.equals(cgroup)).toList()) {
                addOthers(q, dir, 0, ownId, out, dir.toString());
            }
        }
        return List.copyOf(out);
    }

    private static void addOthers(ProgQuery q, Path cgroup, int flags, int ownId, Set<String> out, String where)
            throws NativeIOException {
        int fd;
        try {
            fd = SysCalls.open(cgroup.toString(), Linux.O_RDONLY | Linux.O_DIRECTORY, 0);
        } catch (NativeIOException gone) {
            return; // removed while walked
        }
        try {
            for (int id : q.attached(fd, Libbpf.BPF_CGROUP_SOCK_OPS, flags)) {
                if (id == ownId) {
                    continue;
                }
                ProgQuery.Program p = q.program(id);
                if (p != null) {
                    out.add("id " + p.id() + " '" + p.name() + "' on " + (flags != 0 ? cgroup + " or an ancestor"
                            : where));
                }
            }
        } finally {
            LibC.close(fd);
        }
    }
}
