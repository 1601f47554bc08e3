package io.github.sockmap4j.linux.sys;

import io.github.sockmap4j.linux.ffi.LibC;
import io.github.sockmap4j.linux.ffi.NativeIOException;
import io.github.sockmap4j.linux.net.Sockets;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * sock_diag in several network namespaces: this process's own, and, when built over cgroups,
 * every namespace a process of those cgroups (or of their descendants) is in. A netlink socket
 * answers for the namespace it was created in, so one is made per namespace on a short-lived
 * thread that first enters it ({@code setns} on {@code /proc/PID/ns/net}, which moves only that
 * thread), then used from the caller's thread. {@link #refresh} drops the sockets of namespaces
 * no process of the cgroups is in any more: an open socket keeps its namespace alive.
 *
 * <p><b>Note:</b> not threadsafe: one instance per thread (the watcher's).
 */
public final class NetnsDiags implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(NetnsDiags.class);

    /** One namespace's socket; {@code cookie} is its SO_NETNS_COOKIE, the key field's value. */
    private record Ns(long inode, long cookie, SockDiag diag) {
        void close() {
            diag.close();
        }
    }

    /** A socket found, and the cookie of the namespace it is in. */
    public record Found(long netnsCookie, long[] memInfo) {
    }

    private final List<Path> cgroups;
    private final Map<Long, Ns> byInode = new HashMap<>();
    private final Map<Long, Ns> byCookie = new HashMap<>();
    private final long ownCookie;

    private NetnsDiags(List<Path> cgroups) throws IOException {
        this.cgroups = List.copyOf(cgroups);
        int fd = SockDiag.openSocket();
        Ns own;
        try {
            own = new Ns(inodeOf("thread-self"), NetnsCookie.here(), SockDiag.of(fd));
        } catch (IOException | RuntimeException e) {
            LibC.close(fd);
            throw e;
        }
        ownCookie = own.cookie();
        add(own);
    }

    /** This process's namespace only. */
    public static NetnsDiags ownNamespace() throws IOException {
        return new NetnsDiags(List.of());
    }

    /** This process's namespace and those of every process in {@code cgroups} (see {@link #refresh}). */
    public static NetnsDiags ofCgroups(List<Path> cgroups) throws IOException {
        NetnsDiags d = new NetnsDiags(cgroups);
        d.refresh();
        return d;
    }

    public long ownCookie() {
        return ownCookie;
    }

    /** How many namespaces are looked in. */
    public int namespaces() {
        return byInode.size();
    }

    /** Whether a socket of the namespace with this cookie can be looked up here. */
    public boolean knows(long netnsCookie) {
        return byCookie.containsKey(netnsCookie);
    }

    /**
     * SKMEMINFO of the socket {@code local}→{@code remote} (see {@link SockDiag#memInfo}): in the
     * namespace {@code onlyIn} when it is not 0 (a loopback key names its namespace), else first
     * in {@code hint}'s, then in every other one. Null when no namespace here has it.
     */
    public Found find(long onlyIn, long hint, byte[] local, int localPort, byte[] remote, int remotePort)
            throws NativeIOException {
        if (onlyIn != 0) {
            Ns ns = byCookie.get(onlyIn);
            long[] m = ns == null ? null : ns.diag().memInfo(local, localPort, remote, remotePort);
            return m == null ? null : new Found(onlyIn, m);
        }
        Ns first = byCookie.get(hint);
        if (first != null) {
            long[] m = first.diag().memInfo(local, localPort, remote, remotePort);
            if (m != null) {
                return new Found(first.cookie(), m);
            }
        }
        for (Ns ns : byInode.values()) {
            if (ns != first) {
                long[] m = ns.diag().memInfo(local, localPort, remote, remotePort);
                if (m != null) {
                    return new Found(ns.cookie(), m);
                }
            }
        }
        return null;
    }

    /**
     * Looks again at the processes of the cgroups: opens a socket in each namespace not seen
     * before, closes those of namespaces none of them is in now (this process's own stays).
     * Nothing to do without cgroups.
     */
    public void refresh() {
        if (cgroups.isEmpty()) {
            return;
        }
        Map<Long, Long> present = lookedInto(cgroups);
        Set<Long> stale = new HashSet<>(byInode.keySet());
        stale.removeAll(present.keySet());
        for (Long inode : stale) {
            Ns ns = byInode.get(inode);
            if (ns.cookie() != ownCookie) {
                byInode.remove(inode);
                byCookie.remove(ns.cookie());
                ns.close();
            }
        }
        for (Map.Entry<Long, Long> e : present.entrySet()) {
            if (!byInode.containsKey(e.getKey())) {
                try {
                    add(enter(e.getKey(), e.getValue()));
                } catch (IOException ex) {
                    LOG.debug("Cannot look into the network namespace of pid {}: {}", e.getValue(), ex.toString());
                }
            }
        }
    }

    /**
     * The network namespaces of the processes of {@code cgroups} (and of the cgroups below them)
     * that are looked into, each owner's first {@value #PER_USER}: inode to a process in it. The
     * agent reads listeners in the same ones as this watcher makes sockets in.
     */
    public static Map<Long, Long> lookedInto(List<Path> cgroups) {
        return boundedPerOwner(namespaces(cgroups), UserNamespaces::ownerBelowOurs);
    }

    /** A process a namespace was found through: its pid and the cgroup it was listed in. */
    record Proc(long pid, Path cgroup) {
    }

    /**
     * The network namespaces the processes of {@code cgroups} (and of the cgroups below them) are
     * in: each one's inode and a process in it.
     */
    static Map<Long, Proc> namespaces(List<Path> cgroups) {
        Map<Long, Proc> present = new HashMap<>();
        for (Path cg : cgroups) {
            for (Path dir : Cgroups.tree(cg, Integer.MAX_VALUE)) {
                for (long pid : pids(dir)) {
                    try {
                        present.putIfAbsent(inodeOf(Long.toString(pid)), new Proc(pid, dir));
                    } catch (IOException e) {
                        // The process ended between the two reads.
                    }
                }
            }
        }
        return present;
    }

    /**
     * Network namespaces looked into, at most this many of each owner: any user, and root in any
     * pod, can make thousands ({@code unshare -Urn}), and each costs the agent a socket and a
     * query per look. Namespaces of user namespaces a user other than root made count as that
     * user's; any other as the cgroup its process was found in (a pod's container, whatever it
     * nests: a process makes namespaces at will, never cgroups of its own). Each owner's
     * {@value #PER_USER} with the lowest inodes are kept (the same ones from look to look; the
     * host's, the lowest of all, among them).
     */
    static final int PER_USER = 16;

    /**
     * {@code present} (inode to a process in it) as inode to pid, without each owner's namespaces
     * past {@link #PER_USER}.
     */
    static Map<Long, Long> boundedPerOwner(Map<Long, Proc> present, java.util.function.IntUnaryOperator ownerOfPid) {
        Map<Object, java.util.TreeMap<Long, Long>> byOwner = new HashMap<>();
        Map<Long, Long> kept = new HashMap<>();
        for (Map.Entry<Long, Proc> e : present.entrySet()) {
            int owner = ownerOfPid.applyAsInt((int) e.getValue().pid());
            Object who = owner > 0 ? (Object) owner : e.getValue().cgroup();
            byOwner.computeIfAbsent(who, o -> new java.util.TreeMap<>()).put(e.getKey(), e.getValue().pid());
        }
        for (java.util.TreeMap<Long, Long> mine : byOwner.values()) {
            int n = 0;
            for (Map.Entry<Long, Long> e : mine.entrySet()) {
                if (n++ == PER_USER) {
                    break;
                }
                kept.put(e.getKey(), e.getValue());
            }
        }
        return kept;
    }

    private void add(Ns ns) {
        byInode.put(ns.inode(), ns);
        byCookie.put(ns.cookie(), ns);
    }

    private static List<Long> pids(Path cgroupDir) {
        try {
            return Files.readAllLines(cgroupDir.resolve("cgroup.procs")).stream()
                    .filter(l -> !l.isBlank()).map(Long::parseLong).toList();
        } catch (NoSuchFileException e) {
            return List.of();
        } catch (IOException | NumberFormatException e) {
            return List.of();
        }
    }

    /** The inode of {@code /proc/WHO/ns/net} (its link reads {@code net:[INODE]}). */
    public static long inodeOf(String who) throws IOException {
        String link = Files.readSymbolicLink(Path.of("/proc", who, "ns", "net")).toString();
        int open = link.indexOf('[');
        int close = link.indexOf(']');
        if (!link.startsWith("net:") || open < 0 || close < open) {
            throw new IOException("unexpected /proc/" + who + "/ns/net: " + link);
        }
        return Long.parseLong(link.substring(open + 1, close));
    }

    /** A sock_diag socket made in the namespace of {@code pid}, on a thread that enters it and ends. */
    private static Ns enter(long inode, long pid) throws IOException {
        long[] made = NetnsCookie.inNamespaceOf(pid, () -> {
            long cookie = NetnsCookie.here();
            return new long[] {cookie, SockDiag.openSocket()};
        });
        return new Ns(inode, made[0], SockDiag.of((int) made[1]));
    }

    @Override
    public void close() {
        for (Ns ns : byInode.values()) {
            ns.close();
        }
        byInode.clear();
        byCookie.clear();
    }
}
