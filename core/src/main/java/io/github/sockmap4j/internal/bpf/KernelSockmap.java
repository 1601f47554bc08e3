package io.github.sockmap4j.internal.bpf;

import io.github.sockmap4j.internal.ffi.Errno;
import io.github.sockmap4j.internal.ffi.LibC;
import io.github.sockmap4j.internal.ffi.Libbpf;
import io.github.sockmap4j.internal.ffi.NativeIOException;
import io.github.sockmap4j.internal.sys.Cgroups;
import java.io.IOException;
import java.io.InputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The kernel side of one pin directory: pinned maps and programs, the cgroup attachment, the
 * policy entries of this process.
 *
 * <h2>Who creates and who removes what</h2>
 * Every process using a pin directory holds a shared lock on {@code users.lock}, and a shared
 * lock on {@code cgroup-<id>.lock} for the cgroup it attached to; setup and teardown run under
 * an exclusive {@code setup.lock}, so they never interleave. The first process loads the
 * programs, pins maps and programs, and attaches the {@code sk_msg} verdict to the SOCKHASH;
 * later ones open the pins. A cgroup attachment is a pinned BPF link, made by the first
 * process of that cgroup. On close, a process that finds no other holder of its cgroup lock
 * unpins that link (which detaches the sockops program); one that finds no other user at all
 * unpins everything and removes the directory, unless sockets are still registered: removing
 * the SOCKHASH then would discard redirected bytes their readers have not yet read, so the pins
 * stay, with a warning, for the next process to close. A process that dies releases its locks
 * with it; what it left is removed by the next last user.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
public final class KernelSockmap implements AutoCloseable {
    public static final int ABI_VERSION = 3;
    /** SM4J_UNBOUNDED: a policy bound that turns the in-flight bound off. */
    public static final long UNBOUNDED = 0xffffffffL;
    static final String OBJECT_RESOURCE = "sockmap4j.bpf.o";

    private static final Logger LOG = LoggerFactory.getLogger(KernelSockmap.class);
    private static final String[][] MAP_PINS = {
        {"sm4j_socks", "socks"},
        {"sm4j_policy", "policy"},
        {"sm4j_counters", "counters"},
        {"sm4j_sockstate", "sockstate"},
        {"sm4j_rx", "rx"},
        {"sm4j_slots", "slots"},
        {"sm4j_watch", "watch"},
        {"sm4j_config", "config"},
        {"sm4j_meta", "meta"},
    };
    private static final String[][] PROG_PINS = {
        {"sm4j_sockops", "prog_sockops"},
        {"sm4j_redirect", "prog_redirect"},
    };

    private final Libbpf bpf;
    private final Path pinDir;
    private final Path cgroupDir;
    private final long cgroupId;
    private final LockDir locks;
    private final int socksFd;
    private final int policyFd;
    private final int countersFd;
    private final int stateFd;
    private final int rxFd;
    private final int slotsFd;
    private final int watchFd;
    private final int configFd;
    private final int metaFd;
    private final int sockopsFd;
    private final int redirectFd;
    /*
     * A shared arena owns the mapping: closing it waits until no thread is inside an access
     * and makes later ones throw, where a bare munmap would let a late read crash the JVM.
     */
    private final Arena slotsArena = Arena.ofShared();
    private final ReadSlots slots;
    private final PolicyMap policy;
    private final int possibleCpus;
    private final Map<PolicyRule, Integer> policyRefs = new HashMap<>();
    private boolean closed;

    private KernelSockmap(Libbpf bpf, Path pinDir, Path cgroupDir, long cgroupId, LockDir locks,
                          int[] fds, int possibleCpus) throws IOException {
        this.bpf = bpf;
        this.pinDir = pinDir;
        this.cgroupDir = cgroupDir;
        this.cgroupId = cgroupId;
        this.locks = locks;
        this.socksFd = fds[0];
        this.policyFd = fds[1];
        this.countersFd = fds[2];
        this.stateFd = fds[3];
        this.rxFd = fds[4];
        this.slotsFd = fds[5];
        this.watchFd = fds[6];
        this.configFd = fds[7];
        this.metaFd = fds[8];
        this.sockopsFd = fds[SOCKOPS_FD];
        this.redirectFd = fds[SOCKOPS_FD + 1];
        this.possibleCpus = possibleCpus;
        Libbpf.MapInfo info = bpf.mapInfo(slotsFd);
        long bytes = (long) info.valueSize() * info.maxEntries();
        long length = (bytes + 4095) & ~4095L;
        MemorySegment mapping = LibC.mmapShared(slotsFd, length, LibC.PROT_READ | LibC.PROT_WRITE, slotsArena);
        this.slots = new ReadSlots(mapping, info.maxEntries());
        this.policy = new PolicyMap(bpf, policyFd);
    }

    /** Index of the sockops program's fd in the array openOrCreatePins returns. */
    private static final int SOCKOPS_FD = 9;

    /**
     * Opens (or creates) the pinned objects in {@code pinDir} and attaches the sockops program
     * to {@code cgroupDir}.
     */
    public static KernelSockmap open(Libbpf bpf, Path pinDir, Path cgroupDir, int maxSockets)
            throws IOException {
        Path cg = cgroupDir.toAbsolutePath().normalize();
        long cgroupId = Cgroups.id(cg);
        LockDir locks = LockDir.forPinDir(pinDir);
        locks.lockSetup();
        int[] fds = null;
        try {
            locks.joinUsers(cgroupId);
            Files.createDirectories(pinDir, PosixFilePermissions.asFileAttribute(
                    PosixFilePermissions.fromString("rwxr-x---")));
            fds = openOrCreatePins(bpf, pinDir, maxSockets);
            attachCgroup(bpf, pinDir, cg, cgroupId, fds[SOCKOPS_FD]);
            return new KernelSockmap(bpf, pinDir, cg, cgroupId, locks, fds, bpf.possibleCpus());
        } catch (IOException | RuntimeException e) {
            if (fds != null) {
                for (int fd : fds) {
                    LibC.close(fd);
                }
            }
            try {
                teardownIfLast(bpf, pinDir, cgroupId, locks, -1);
            } catch (IOException suppressed) {
                e.addSuppressed(suppressed);
            }
            locks.close();
            throw e;
        } finally {
            locks.unlockSetup();
        }
    }

    private static String pin(Path dir, String name) {
        return dir.resolve(name).toString();
    }

    private static int[] openOrCreatePins(Libbpf bpf, Path dir, int maxSockets) throws IOException {
        int present = 0;
        for (String[] p : MAP_PINS) {
            present += Files.exists(dir.resolve(p[1])) ? 1 : 0;
        }
        for (String[] p : PROG_PINS) {
            present += Files.exists(dir.resolve(p[1])) ? 1 : 0;
        }
        if (present != 0 && present != MAP_PINS.length + PROG_PINS.length) {
            // A process died half-way through setup (setup runs under the lock, so nobody is in it now).
            LOG.warn("Removing incomplete pins in {} left by an interrupted setup", dir);
            unpinObjects(dir);
            present = 0;
        }
        if (present == 0) {
            createPins(bpf, dir, maxSockets);
        }
        int[] fds = new int[MAP_PINS.length + PROG_PINS.length];
        int i = 0;
        try {
            for (String[] p : MAP_PINS) {
                fds[i++] = getPinned(bpf, pin(dir, p[1]));
            }
            for (String[] p : PROG_PINS) {
                fds[i++] = getPinned(bpf, pin(dir, p[1]));
            }
            checkAbi(bpf, dir, fds[MAP_PINS.length - 1]);
            return fds;
        } catch (IOException e) {
            for (int j = 0; j < i; j++) {
                LibC.close(fds[j]);
            }
            throw e;
        }
    }

    private static int getPinned(Libbpf bpf, String path) throws NativeIOException {
        int fd = bpf.tryGetPinned(path);
        if (fd < 0) {
            throw new NativeIOException("bpf_obj_get", -fd, path);
        }
        return fd;
    }

    private static void checkAbi(Libbpf bpf, Path dir, int metaFd) throws IOException {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment key = arena.allocate(ValueLayout.JAVA_INT);
            MemorySegment val = arena.allocate(ValueLayout.JAVA_INT);
            int r = bpf.tryMapLookup(metaFd, key, val);
            if (r < 0) {
                throw new NativeIOException("bpf_map_lookup_elem(meta)", -r, dir.toString());
            }
            int abi = val.get(ValueLayout.JAVA_INT, 0);
            if (abi != ABI_VERSION) {
                throw new IOException("the pins in " + dir + " come from another sockmap4j version (ABI "
                        + abi + ", this library has " + ABI_VERSION + "): stop the processes using them, "
                        + "or set -Dsockmap4j.pinDir to another directory");
            }
        }
    }

    private static void createPins(Libbpf bpf, Path dir, int maxSockets) throws IOException {
        byte[] elf = embeddedObject();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment buf = arena.allocate(elf.length, 8);
            MemorySegment.copy(elf, 0, buf, ValueLayout.JAVA_BYTE, 0, elf.length);
            MemorySegment obj = bpf.openObject(buf);
            List<String> pinned = new ArrayList<>();
            try {
                bpf.setMaxEntries(bpf.findMap(obj, "sm4j_socks"), maxSockets);
                bpf.setMaxEntries(bpf.findMap(obj, "sm4j_rx"), maxSockets);
                bpf.setMaxEntries(bpf.findMap(obj, "sm4j_slots"), maxSockets);
                bpf.setMaxEntries(bpf.findMap(obj, "sm4j_watch"), maxSockets);
                bpf.loadObject(obj);
                int socks = bpf.mapFd(bpf.findMap(obj, "sm4j_socks"));
                int redirect = bpf.programFd(bpf.findProgram(obj, "sm4j_redirect"));
                bpf.progAttach(redirect, socks, Libbpf.BPF_SK_MSG_VERDICT);
                MemorySegment key = arena.allocate(ValueLayout.JAVA_INT);
                MemorySegment val = arena.allocateFrom(ValueLayout.JAVA_INT, ABI_VERSION);
                int r = bpf.tryMapUpdate(bpf.mapFd(bpf.findMap(obj, "sm4j_meta")), key, val, Libbpf.BPF_ANY);
                if (r < 0) {
                    throw new NativeIOException("bpf_map_update_elem(meta)", -r);
                }
                MemorySegment cfg = arena.allocate(WatchLayout.CONFIG);
                cfg.set(ValueLayout.JAVA_INT, 0, defaultWatchBound());
                r = bpf.tryMapUpdate(bpf.mapFd(bpf.findMap(obj, "sm4j_config")), key, cfg, Libbpf.BPF_ANY);
                if (r < 0) {
                    throw new NativeIOException("bpf_map_update_elem(config)", -r);
                }
                // The meta map is pinned last: its pin marks a complete set.
                for (String[] p : MAP_PINS) {
                    bpf.pin(bpf.mapFd(bpf.findMap(obj, p[0])), pin(dir, p[1]));
                    pinned.add(p[1]);
                }
                for (String[] p : PROG_PINS) {
                    bpf.pin(bpf.programFd(bpf.findProgram(obj, p[0])), pin(dir, p[1]));
                    pinned.add(p[1]);
                }
            } catch (IOException | RuntimeException e) {
                for (String p : pinned) {
                    Files.deleteIfExists(dir.resolve(p));
                }
                throw e;
            } finally {
                bpf.closeObject(obj);
            }
        }
        LOG.debug("Loaded the sockmap4j programs and pinned them in {}", dir);
    }

    /** The compiled BPF object embedded in this jar. */
    public static byte[] embeddedObject() throws IOException {
        try (InputStream in = KernelSockmap.class.getResourceAsStream(OBJECT_RESOURCE)) {
            if (in == null) {
                throw new IOException("the BPF object " + OBJECT_RESOURCE
                        + " is missing from the sockmap4j-core jar (a broken build)");
            }
            return in.readAllBytes();
        }
    }

    private static void attachCgroup(Libbpf bpf, Path dir, Path cgroup, long cgroupId, int sockopsFd)
            throws IOException {
        Path link = dir.resolve(linkName(cgroupId));
        if (Files.exists(link)) {
            return;
        }
        int cgFd = LibC.open(cgroup.toString(), LibC.O_RDONLY | LibC.O_DIRECTORY, 0);
        try {
            int linkFd = bpf.linkCreate(sockopsFd, cgFd, Libbpf.BPF_CGROUP_SOCK_OPS);
            try {
                bpf.pin(linkFd, link.toString());
            } finally {
                LibC.close(linkFd);
            }
        } finally {
            LibC.close(cgFd);
        }
        LOG.debug("Attached sm4j_sockops to cgroup {} (id {})", cgroup, cgroupId);
    }

    private static String linkName(long cgroupId) {
        return "link_cgroup_" + cgroupId;
    }

    private static void unpinObjects(Path dir) throws IOException {
        for (String[] p : PROG_PINS) {
            Files.deleteIfExists(dir.resolve(p[1]));
        }
        for (String[] p : MAP_PINS) {
            Files.deleteIfExists(dir.resolve(p[1]));
        }
    }

    /**
     * The summed counters and registered sockets of a pin directory, read from its pins without
     * attaching anything; null when there are no pins.
     */
    public static long[] readStats(Libbpf bpf, Path dir) throws IOException {
        int counters = bpf.tryGetPinned(pin(dir, "counters"));
        if (counters < 0) {
            if (-counters == Errno.ENOENT) {
                return null;
            }
            throw new NativeIOException("bpf_obj_get", -counters, pin(dir, "counters"));
        }
        int socks = bpf.tryGetPinned(pin(dir, "socks"));
        try (Arena arena = Arena.ofConfined()) {
            int cpus = bpf.possibleCpus();
            long[] out = new long[Counter.values().length + 1];
            MemorySegment key = arena.allocate(ValueLayout.JAVA_INT);
            MemorySegment val = arena.allocate(8L * cpus, 8);
            for (Counter c : Counter.values()) {
                key.set(ValueLayout.JAVA_INT, 0, c.ordinal());
                if (bpf.tryMapLookup(counters, key, val) == 0) {
                    for (int cpu = 0; cpu < cpus; cpu++) {
                        out[c.ordinal()] += val.getAtIndex(ValueLayout.JAVA_LONG, cpu);
                    }
                }
            }
            out[Counter.values().length] = socks < 0 ? 0 : countKeys(bpf, socks, SockKeyLayout.LAYOUT.byteSize());
            return out;
        } finally {
            LibC.close(counters);
            LibC.close(socks);
        }
    }

    /** The pin that marks a directory as an agent's: its pins outlive every other process. */
    static final String AGENT_PIN = "agent";

    public static boolean isAgentOwned(Path dir) {
        return Files.exists(dir.resolve(AGENT_PIN));
    }

    /** Marks the pin directory as an agent's (pins the meta map once more as {@value #AGENT_PIN}). */
    public synchronized void markAgentOwned() throws IOException {
        ensureOpen();
        if (!isAgentOwned(pinDir)) {
            bpf.pin(metaFd, pin(pinDir, AGENT_PIN));
        }
    }

    /**
     * Under the setup lock, having left the user locks: detaches the cgroup link when no other
     * process of that cgroup remains, and removes the pins when no user remains and no socket is
     * registered.
     */
    private static void teardownIfLast(Libbpf bpf, Path dir, long cgroupId, LockDir locks, int socksFd)
            throws IOException {
        if (isAgentOwned(dir)) {
            // The agent owns pins and attachments: this process only leaves.
            locks.leaveCgroupAndCheckLast(cgroupId);
            locks.leaveUsersAndCheckLast();
            return;
        }
        if (locks.leaveCgroupAndCheckLast(cgroupId)) {
            Files.deleteIfExists(dir.resolve(linkName(cgroupId)));
        }
        if (!locks.leaveUsersAndCheckLast()) {
            return;
        }
        int registered = socksFd >= 0 ? countKeys(bpf, socksFd, SockKeyLayout.LAYOUT.byteSize()) : 0;
        if (registered > 0) {
            LOG.warn("{} sockets are still registered in {}; leaving its pins in place so their unread bytes "
                    + "are not lost. The next sockmap4j process to close there removes them.", registered, dir);
            return;
        }
        try (var entries = Files.list(dir)) {
            for (Path p : (Iterable<Path>) entries::iterator) {
                if (p.getFileName().toString().startsWith("link_cgroup_")) {
                    // Links of cgroups whose processes all died without closing.
                    Files.deleteIfExists(p);
                }
            }
        } catch (java.nio.file.NoSuchFileException e) {
            return;
        }
        unpinObjects(dir);
        try {
            Files.deleteIfExists(dir);
        } catch (java.nio.file.DirectoryNotEmptyException e) {
            LOG.warn("{} holds files sockmap4j did not create; leaving the directory", dir);
        }
        locks.removeFiles();
    }

    /**
     * Removes every pin in {@code dir} (cgroup links, programs, maps) and the directory,
     * whoever uses them. Connections in the SOCKHASH leave the fast path; redirected bytes
     * their readers have not read yet may be lost. For operators and test clean-up.
     *
     * @return how many pins were removed
     */
    public static int forceRemove(Path dir) throws IOException {
        if (!Files.isDirectory(dir)) {
            return 0;
        }
        LockDir locks = LockDir.forPinDir(dir);
        locks.lockSetup();
        try {
            int n = 0;
            try (var entries = Files.list(dir)) {
                for (Path p : (Iterable<Path>) entries::iterator) {
                    if (p.getFileName().toString().startsWith("link_cgroup_")) {
                        n += Files.deleteIfExists(p) ? 1 : 0;
                    }
                }
            }
            n += Files.deleteIfExists(dir.resolve(AGENT_PIN)) ? 1 : 0;
            for (String[] p : PROG_PINS) {
                n += Files.deleteIfExists(dir.resolve(p[1])) ? 1 : 0;
            }
            for (String[] p : MAP_PINS) {
                n += Files.deleteIfExists(dir.resolve(p[1])) ? 1 : 0;
            }
            Files.deleteIfExists(dir);
            locks.removeFiles();
            return n;
        } finally {
            locks.unlockSetup();
            locks.close();
        }
    }

    static int countKeys(Libbpf bpf, int mapFd, long keySize) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment a = arena.allocate(keySize, 8);
            MemorySegment b = arena.allocate(keySize, 8);
            int n = 0;
            MemorySegment prev = MemorySegment.NULL;
            while (bpf.tryMapNextKey(mapFd, prev, b) == 0) {
                n++;
                MemorySegment.copy(b, 0, a, 0, keySize);
                prev = a;
            }
            return n;
        }
    }

    public Path pinDir() {
        return pinDir;
    }

    public Path cgroupDir() {
        return cgroupDir;
    }

    public long cgroupId() {
        return cgroupId;
    }

    /**
     * The first bound of a receiver that publishes nothing: net.ipv4.tcp_rmem's default, the
     * receive buffer TCP gives a socket before autotuning (131072 where unset).
     */
    static int defaultWatchBound() {
        try (var in = Files.newInputStream(Path.of("/proc/sys/net/ipv4/tcp_rmem"))) {
            String[] f = new String(in.readAllBytes(), java.nio.charset.StandardCharsets.US_ASCII).trim().split("\\s+");
            return Integer.parseInt(f[1]);
        } catch (IOException | RuntimeException e) {
            return 131072;
        }
    }

    /** One receiver that publishes nothing, as the sender's verdict left it. */
    public record Watched(byte[] key, long sent, long read, int bound, int flags) {
    }

    /** Every entry of sm4j_watch. */
    public synchronized java.util.List<Watched> watched() {
        java.util.List<Watched> out = new ArrayList<>();
        if (closed) {
            return out;
        }
        long ks = SockKeyLayout.LAYOUT.byteSize();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment prev = arena.allocate(ks, 8);
            MemorySegment next = arena.allocate(ks, 8);
            MemorySegment val = arena.allocate(WatchLayout.WATCH);
            MemorySegment cursor = MemorySegment.NULL;
            while (bpf.tryMapNextKey(watchFd, cursor, next) == 0) {
                if (bpf.tryMapLookup(watchFd, next, val) == 0) {
                    out.add(new Watched(next.toArray(ValueLayout.JAVA_BYTE), val.get(ValueLayout.JAVA_LONG, WatchLayout.SENT),
                            val.get(ValueLayout.JAVA_LONG, WatchLayout.READ), val.get(ValueLayout.JAVA_INT, WatchLayout.BOUND),
                            val.get(ValueLayout.JAVA_INT, WatchLayout.FLAGS)));
                }
                MemorySegment.copy(next, 0, prev, 0, ks);
                cursor = prev;
            }
        }
        return out;
    }

    /** Publishes a watcher's estimate for one receiver (only if the entry still exists). */
    public synchronized void updateWatched(byte[] key, long sent, long read, int bound, int flags) {
        if (closed) {
            return;
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment val = arena.allocate(WatchLayout.WATCH);
            val.set(ValueLayout.JAVA_LONG, WatchLayout.SENT, sent);
            val.set(ValueLayout.JAVA_LONG, WatchLayout.READ, read);
            val.set(ValueLayout.JAVA_INT, WatchLayout.BOUND, bound);
            val.set(ValueLayout.JAVA_INT, WatchLayout.FLAGS, flags);
            bpf.tryMapUpdate(watchFd, arena.allocateFrom(ValueLayout.JAVA_BYTE, key), val, Libbpf.BPF_EXIST);
        }
    }

    public synchronized void deleteWatched(byte[] key) {
        if (!closed) {
            try (Arena arena = Arena.ofConfined()) {
                bpf.tryMapDelete(watchFd, arena.allocateFrom(ValueLayout.JAVA_BYTE, key));
            }
        }
    }

    /**
     * The policy map alone, opened from its pin: what a process without CAP_BPF may use when
     * the pin file lets it write (see {@code PolicyClient}).
     */
    public static PolicyMap openPolicy(Libbpf bpf, Path pinDir) throws IOException {
        int fd = bpf.tryGetPinned(pin(pinDir, "policy"));
        if (fd < 0) {
            String why = -fd == Errno.ENOENT ? "no fast path is set up there (start the agent, or any privileged "
                    + "sockmap4j process, with this pin directory)"
                    : -fd == Errno.EACCES || -fd == Errno.EPERM ? "this user may not write it: the owner of the pins "
                    + "must grant its group (PolicyClient.grant)" : "";
            throw new NativeIOException("bpf_obj_get", -fd, pin(pinDir, "policy") + ": " + why);
        }
        return new PolicyMap(bpf, fd);
    }

    /** A policy map opened from its pin, with no other kernel object. */
    public static final class PolicyMap implements AutoCloseable {
        private final Libbpf bpf;
        private int fd;

        PolicyMap(Libbpf bpf, int fd) {
            this.bpf = bpf;
            this.fd = fd;
        }

        public synchronized PolicyRule add(int port, InetAddress network, int bits) throws IOException {
            PolicyRule rule = rule(port, network, bits);
            put(rule, 0);
            return rule;
        }

        /** Adds or replaces a rule with its bound (0: each receiver's). */
        public synchronized void put(PolicyRule rule, int bound) throws IOException {
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment key = arena.allocateFrom(ValueLayout.JAVA_BYTE, HexFormat.of().parseHex(rule.prefixHex()));
                MemorySegment val = arena.allocate(PolicyKeyLayout.VALUE);
                val.set(ValueLayout.JAVA_INT, PolicyKeyLayout.BOUND, bound);
                int r = bpf.tryMapUpdate(fd, key, val, Libbpf.BPF_ANY);
                if (r < 0) {
                    throw new NativeIOException("bpf_map_update_elem(policy)", -r,
                            -r == Errno.ENOSPC || -r == Errno.E2BIG
                                    ? "the policy map is full (65,536 rules): deny rules no longer needed"
                                    : "port " + rule.port());
                }
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

        public synchronized void setBound(PolicyRule rule, int bound) throws IOException {
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment key = arena.allocateFrom(ValueLayout.JAVA_BYTE, HexFormat.of().parseHex(rule.prefixHex()));
                MemorySegment val = arena.allocate(PolicyKeyLayout.VALUE);
                val.set(ValueLayout.JAVA_INT, PolicyKeyLayout.BOUND, bound);
                int r = bpf.tryMapUpdate(fd, key, val, Libbpf.BPF_EXIST);
                if (r < 0) {
                    throw new NativeIOException("bpf_map_update_elem(policy)", -r, "port " + rule.port());
                }
            }
        }

        public synchronized void remove(PolicyRule rule) {
            tryRemove(rule);
        }

        /** Removes a rule; 0 or {@code -errno} (ENOENT when it was not there). */
        public synchronized int tryRemove(PolicyRule rule) {
            if (fd < 0) {
                return -Errno.EBADF;
            }
            try (Arena arena = Arena.ofConfined()) {
                return bpf.tryMapDelete(fd, arena.allocateFrom(ValueLayout.JAVA_BYTE,
                        HexFormat.of().parseHex(rule.prefixHex())));
            }
        }

        @Override
        public synchronized void close() {
            LibC.close(fd);
            fd = -1;
        }
    }

    /** A policy rule: a server port, optionally limited to a server address prefix. */
    public record PolicyRule(int port, String prefixHex, int bits) {
    }

    /**
     * Opts a server endpoint in. Rules are counted in this process: the entry leaves the kernel
     * when the last {@link #optOut} of the same rule runs.
     */
    public synchronized PolicyRule optIn(int port, InetAddress network, int bits) throws IOException {
        return optIn(port, network, bits, 0);
    }

    /**
     * Opts a server endpoint in with an in-flight bound in bytes (0: each receiver's
     * SO_RCVBUF). The bound of an existing rule is replaced.
     */
    public synchronized PolicyRule optIn(int port, InetAddress network, int bits, int bound) throws IOException {
        ensureOpen();
        PolicyRule rule = policy.rule(port, network, network == null ? 0 : bits);
        Integer refs = policyRefs.get(rule);
        if (refs == null || bound != 0) {
            policy.put(rule, bound);
        }
        policyRefs.put(rule, refs == null ? 1 : refs + 1);
        return rule;
    }

    public synchronized void optOut(PolicyRule rule) {
        Integer refs = policyRefs.get(rule);
        if (refs == null || closed) {
            return;
        }
        if (refs > 1) {
            policyRefs.put(rule, refs - 1);
            return;
        }
        policyRefs.remove(rule);
        deletePolicy(rule);
    }

    private void deletePolicy(PolicyRule rule) {
        int r = policy.tryRemove(rule);
        if (r < 0 && -r != Errno.ENOENT) {
            LOG.warn("Could not remove the policy entry for port {}: {}", rule.port(), Errno.describe(-r));
        }
    }

    /** Sets the bound of an opted-in rule in the kernel's policy (for connections made from now on). */
    public synchronized void setPolicyBound(PolicyRule rule, int bound) throws IOException {
        ensureOpen();
        policy.setBound(rule, bound);
    }

    /**
     * The bound of the policy entry matching this server endpoint, as the unsigned 32-bit value
     * the kernel holds: -1 when none matches, 0 when it leaves the bound to the receiver,
     * {@link #UNBOUNDED} when it turns the bound off.
     */
    public long policyBound(InetAddress server, int port) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment key = arena.allocate(PolicyKeyLayout.LAYOUT);
            PolicyKeyLayout.fill(key, port, SockKeyLayout.mapped(server), 128);
            MemorySegment val = arena.allocate(PolicyKeyLayout.VALUE);
            return bpf.tryMapLookup(policyFd, key, val) == 0
                    ? Integer.toUnsignedLong(val.get(ValueLayout.JAVA_INT, PolicyKeyLayout.BOUND)) : -1;
        }
    }

    /** A receiving socket's claim on a read slot; see {@link #claimReadSlot}. */
    public record ReadSlot(int index, long cookie, byte[] key) {
    }

    /**
     * Claims a read slot for a receiving socket of this process and maps its key to it, so
     * that senders to it keep what they redirect unread under {@code bound}. Null when no slot
     * is free (the socket then receives without a bound, as before this mechanism).
     */
    public synchronized ReadSlot claimReadSlot(long cookie, InetAddress local, int localPort, InetAddress remote, int remotePort,
                                  long netns, int bound) throws IOException {
        ensureOpen();
        int idx = slots.claim(cookie, bound);
        if (idx < 0) {
            LOG.warn("No free read slot among {}: a connection receives without an in-flight bound", slots.count());
            return null;
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment key = arena.allocate(SockKeyLayout.LAYOUT);
            SockKeyLayout.fill(key, local, localPort, remote, remotePort, netns);
            MemorySegment val = arena.allocate(ReadSlotLayout.RX);
            val.set(ValueLayout.JAVA_INT, 0, idx);
            val.set(ValueLayout.JAVA_LONG, 8, cookie);
            int r = bpf.tryMapUpdate(rxFd, key, val, Libbpf.BPF_ANY);
            if (r < 0) {
                slots.release(idx, cookie);
                throw new NativeIOException("bpf_map_update_elem(rx)", -r);
            }
            return new ReadSlot(idx, cookie, key.toArray(ValueLayout.JAVA_BYTE));
        }
    }

    public ReadSlots readSlots() {
        return slots;
    }

    public void setSlotBound(ReadSlot slot, int bound) {
        slots.setBound(slot.index(), bound);
    }

    public int slotBound(ReadSlot slot) {
        return slots.bound(slot.index());
    }

    public synchronized void releaseReadSlot(ReadSlot slot) {
        if (closed) {
            return; // the maps and the mapping are gone; the kernel's state callback dropped the entry
        }
        try (Arena arena = Arena.ofConfined()) {
            int r = bpf.tryMapDelete(rxFd, arena.allocateFrom(ValueLayout.JAVA_BYTE, slot.key()));
            assert r == 0 || -r == Errno.ENOENT : "rx delete: " + r;
        }
        slots.release(slot.index(), slot.cookie());
    }

    /**
     * What the receiving socket under this key published as read, or -1 when it publishes
     * nothing (no slot, or the slot changed hands), as the verdict program decides it.
     */
    public synchronized long publishedRead(InetAddress local, int localPort, InetAddress remote, int remotePort,
                                           long netns) {
        if (closed) {
            return -1;
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment key = arena.allocate(SockKeyLayout.LAYOUT);
            SockKeyLayout.fill(key, local, localPort, remote, remotePort, netns);
            MemorySegment rx = arena.allocate(ReadSlotLayout.RX);
            if (bpf.tryMapLookup(rxFd, key, rx) != 0) {
                return -1;
            }
            return slots.read(rx.get(ValueLayout.JAVA_INT, 0), rx.get(ValueLayout.JAVA_LONG, 8));
        }
    }

    /** The bytes a socket of this process had sent, redirected or by TCP, as of its last verdict. */
    public long socketSent(int socketFd) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment key = arena.allocateFrom(ValueLayout.JAVA_INT, socketFd);
            MemorySegment val = arena.allocate(SockStateLayout.LAYOUT);
            return bpf.tryMapLookup(stateFd, key, val) == 0
                    ? val.get(ValueLayout.JAVA_LONG, SockStateLayout.REDIRECTED) + val.get(ValueLayout.JAVA_LONG,
                    SockStateLayout.TCP_BYTES) : 0;
        }
    }

    /** Whether a policy entry matches this server endpoint (as the kernel decides it). */
    public boolean policyAllows(InetAddress server, int port) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment key = arena.allocate(PolicyKeyLayout.LAYOUT);
            PolicyKeyLayout.fill(key, port, SockKeyLayout.mapped(server), 128);
            return bpf.tryMapLookup(policyFd, key, arena.allocate(PolicyKeyLayout.VALUE)) == 0;
        }
    }

    /**
     * The socket cookie stored under this key, or 0 when the key is absent.
     */
    public long lookupSocket(InetAddress local, int localPort, InetAddress remote, int remotePort, long netns) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment key = arena.allocate(SockKeyLayout.LAYOUT);
            SockKeyLayout.fill(key, local, localPort, remote, remotePort, netns);
            MemorySegment val = arena.allocate(ValueLayout.JAVA_LONG);
            return bpf.tryMapLookup(socksFd, key, val) == 0 ? val.get(ValueLayout.JAVA_LONG, 0) : 0L;
        }
    }

    /** The sm4j_sock_state flags of a socket of this process (0 when it has none). */
    public int socketFlags(int socketFd) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment key = arena.allocateFrom(ValueLayout.JAVA_INT, socketFd);
            MemorySegment val = arena.allocate(SockStateLayout.LAYOUT);
            return bpf.tryMapLookup(stateFd, key, val) == 0 ? val.get(ValueLayout.JAVA_INT, SockStateLayout.FLAGS) : 0;
        }
    }

    /** How many sockets the SOCKHASH holds now. */
    public int registeredSockets() {
        return countKeys(bpf, socksFd, SockKeyLayout.LAYOUT.byteSize());
    }

    /** The per-CPU counters, summed. */
    public long[] counters() {
        long[] out = new long[Counter.values().length];
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment key = arena.allocate(ValueLayout.JAVA_INT);
            MemorySegment val = arena.allocate(8L * possibleCpus, 8);
            for (Counter c : Counter.values()) {
                key.set(ValueLayout.JAVA_INT, 0, c.ordinal());
                if (bpf.tryMapLookup(countersFd, key, val) == 0) {
                    long sum = 0;
                    for (int cpu = 0; cpu < possibleCpus; cpu++) {
                        sum += val.getAtIndex(ValueLayout.JAVA_LONG, cpu);
                    }
                    out[c.ordinal()] = sum;
                }
            }
        }
        return out;
    }

    public int sockopsProgramFd() {
        return sockopsFd;
    }

    public int redirectProgramFd() {
        return redirectFd;
    }

    private void ensureOpen() throws IOException {
        if (closed) {
            throw new IOException("the sockmap4j kernel handle for " + pinDir + " is closed");
        }
    }

    @Override
    public synchronized void close() throws IOException {
        if (closed) {
            return;
        }
        closed = true;
        for (PolicyRule rule : policyRefs.keySet()) {
            deletePolicy(rule);
        }
        policyRefs.clear();
        locks.lockSetup();
        try {
            teardownIfLast(bpf, pinDir, cgroupId, locks, socksFd);
        } finally {
            slotsArena.close();
            for (int fd : new int[] {socksFd, policyFd, countersFd, stateFd, rxFd, slotsFd, watchFd, configFd, metaFd,
                sockopsFd, redirectFd}) {
                LibC.close(fd);
            }
            locks.unlockSetup();
            locks.close();
        }
    }
}
