package io.github.sockmap4j.linux.bpf;

import io.github.sockmap4j.linux.ffi.Errno;
import io.github.sockmap4j.linux.ffi.LibC;
import io.github.sockmap4j.linux.ffi.Libbpf;
import io.github.sockmap4j.linux.ffi.Linux;
import io.github.sockmap4j.linux.ffi.SysCalls;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.DirectoryNotEmptyException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.List;
import java.util.OptionalInt;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The life of a pin directory's objects: created or opened, attached to cgroups, torn down by
 * the last user. Every call that changes the directory runs under its setup lock ({@link LockDir}).
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
 * with it; what it left is removed by the next last user. A directory with an {@value #AGENT_PIN}
 * pin belongs to an agent: nobody else tears it down.
 */
public final class Pins {
    /** SM4J_ABI_VERSION: a process refuses pins whose meta map holds another. */
    public static final int ABI_VERSION = 18;
    /** The pin that marks a directory as an agent's: its pins outlive every other process. */
    static final String AGENT_PIN = "agent";
    private static final String LINK_PREFIX = "link_cgroup_";
    private static final Logger LOG = LoggerFactory.getLogger(Pins.class);

    private Pins() {
    }

    /** Opens the pins of {@code dir}, creating them first when there are none. Under the setup lock. */
    static PinnedObjects openOrCreate(Libbpf bpf, Path dir, int maxSockets) throws IOException {
        return openOrCreate(bpf, dir, maxSockets, false);
    }

    /**
     * The same; {@code retireOtherAbi} (the node agent, the directory's owner): pins of another
     * ABI version are retired ({@link RetiredSets#retire}) and new ones made, instead of being refused.
     */
    static PinnedObjects openOrCreate(Libbpf bpf, Path dir, int maxSockets, boolean retireOtherAbi)
            throws IOException {
        // The meta pin first: a set of another version may have other pins, which must not be taken
        // for an interrupted setup and removed.
        OptionalInt abi = pinnedAbi(bpf, dir);
        if (abi.isPresent() && abi.getAsInt() != ABI_VERSION) {
            if (!retireOtherAbi) {
                throw otherAbi(dir, abi.getAsInt());
            }
            RetiredSets.retire(dir, abi.getAsInt());
        }
        int present = 0;
        for (Pin p : Pin.values()) {
            present += Files.exists(dir.resolve(p.fileName)) ? 1 : 0;
        }
        if (present != 0 && present != Pin.values().length) {
            // A process died half-way through setup (setup runs under the lock, so nobody is in it now).
            LOG.warn("Removing incomplete pins in {} left by an interrupted setup", dir);
            unpinObjects(dir);
            present = 0;
        }
        if (present == 0) {
            ObjectLoader.create(bpf, dir, maxSockets);
        }
        PinnedObjects fds = PinnedObjects.open(bpf, dir);
        try {
            checkAbi(bpf, dir, fds.meta());
            return fds;
        } catch (IOException e) {
            fds.closeAllButPolicy();
            LibC.close(fds.policy());
            throw e;
        }
    }

    private static void checkAbi(Libbpf bpf, Path dir, int metaFd) throws IOException {
        int abi = abiOf(bpf, dir, metaFd);
        if (abi != ABI_VERSION) {
            throw otherAbi(dir, abi);
        }
    }

    /** The ABI version the meta map {@code metaFd} of {@code dir} holds. */
    private static int abiOf(Libbpf bpf, Path dir, int metaFd) throws IOException {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment key = arena.allocate(ValueLayout.JAVA_INT);
            MemorySegment val = arena.allocate(ValueLayout.JAVA_INT);
            int r = bpf.tryMapLookup(metaFd, key, val);
            if (r < 0) {
                throw Errno.error("bpf_map_lookup_elem(meta)", r, dir.toString());
            }
            return val.get(ValueLayout.JAVA_INT, 0);
        }
    }

    private static IOException otherAbi(Path dir, int abi) {
        return new IOException("the pins in " + dir + " come from another sockmap4j version (ABI " + abi
                + ", this library has " + ABI_VERSION + "): where a node agent owns them, start the agent of this "
                + "version there first (it retires them and makes new ones); otherwise stop the processes using "
                + "them, or set -Dsockmap4j.pinDir to another directory");
    }

    /** The ABI version in the meta pin of {@code dir}; empty when it has none. */
    static OptionalInt pinnedAbi(Libbpf bpf, Path dir) throws IOException {
        int fd = bpf.tryGetPinned(Pin.META.path(dir));
        if (fd < 0) {
            if (-fd == Errno.ENOENT) {
                return OptionalInt.empty();
            }
            throw Errno.error("bpf_obj_get", fd, Pin.META.path(dir));
        }
        try {
            return OptionalInt.of(abiOf(bpf, dir, fd));
        } finally {
            LibC.close(fd);
        }
    }

    /**
     * Attaches the cgroup programs (sockops; connect4/6, getpeername4/6 and getsockopt of the
     * Service translation) to {@code cgroup}, each through a pinned link, unless one is pinned.
     *
     * @param programs pairs of program fd and attach type, the sockops program first
     */
    static void attachCgroup(Libbpf bpf, Path dir, Path cgroup, long cgroupId, int[][] programs) throws IOException {
        int cgFd = SysCalls.open(cgroup.toString(), Linux.O_RDONLY | Linux.O_DIRECTORY, 0);
        try {
            for (int i = 0; i < programs.length; i++) {
                Path link = dir.resolve(linkName(cgroupId) + (i == 0 ? "" : "-" + programs[i][1]));
                if (Files.exists(link)) {
                    continue;
                }
                int linkFd = bpf.linkCreate(programs[i][0], cgFd, programs[i][1]);
                try {
                    bpf.pin(linkFd, link.toString());
                } finally {
                    LibC.close(linkFd);
                }
            }
        } finally {
            LibC.close(cgFd);
        }
        LOG.debug("Attached the cgroup programs to cgroup {} (id {})", cgroup, cgroupId);
    }

    /** Unpins every link of the cgroup {@code cgroupId}, which detaches its programs. */
    private static void unpinLinks(Path dir, long cgroupId) throws IOException {
        String name = linkName(cgroupId);
        try (var entries = Files.list(dir)) {
            for (Path p : (Iterable<Path>) entries::iterator) {
                String f = p.getFileName().toString();
                if (f.equals(name) || f.startsWith(name + "-")) {
                    Files.deleteIfExists(p);
                }
            }
        }
    }

    static String linkName(long cgroupId) {
        return LINK_PREFIX + cgroupId;
    }

    /** The pin of the link that attaches the sockops program to the cgroup {@code cgroupId}. */
    public static Path linkPin(Path dir, long cgroupId) {
        return dir.resolve(linkName(cgroupId));
    }

    /** The policy map's pin. */
    public static Path policyPin(Path dir) {
        return dir.resolve(Pin.POLICY.fileName);
    }

    /** Of the pins an agent's directory cannot do without (its mark, the policy map, the SOCKHASH), those gone. */
    public static List<Path> agentPinsMissing(Path dir) {
        return java.util.stream.Stream.of(dir.resolve(AGENT_PIN), policyPin(dir), dir.resolve(Pin.SOCKS.fileName))
                .filter(p -> !Files.exists(p)).toList();
    }

    /** The ids of the cgroups the sockops program of {@code dir} is attached to (one link pin each), sorted. */
    public static List<Long> attachedCgroups(Path dir) throws IOException {
        if (!Files.isDirectory(dir)) {
            return List.of();
        }
        try (var entries = Files.list(dir)) {
            return entries.map(p -> p.getFileName().toString()).filter(n -> n.matches(LINK_PREFIX + "\\d+"))
                    .map(n -> Long.parseLong(n.substring(LINK_PREFIX.length()))).sorted().toList();
        }
    }

    private static void unpinObjects(Path dir) throws IOException {
        for (Pin p : Pin.values()) {
            Files.deleteIfExists(dir.resolve(p.fileName));
        }
    }

    static int unpinLinks(Path dir) throws IOException {
        int n = 0;
        try (var entries = Files.list(dir)) {
            for (Path p : (Iterable<Path>) entries::iterator) {
                if (p.getFileName().toString().startsWith(LINK_PREFIX)) {
                    n += Files.deleteIfExists(p) ? 1 : 0;
                }
            }
        }
        return n;
    }

    /**
     * The summed counters and registered sockets of a pin directory, read from its pins without
     * attaching anything ({@code Counter.values().length} counters, then the socket count); null
     * when there are no pins.
     */
    public static long[] readStats(Libbpf bpf, Path dir) throws IOException {
        int counters = bpf.tryGetPinned(Pin.COUNTERS.path(dir));
        if (counters < 0) {
            if (-counters == Errno.ENOENT) {
                return null;
            }
            throw Errno.error("bpf_obj_get", counters, Pin.COUNTERS.path(dir));
        }
        int socks = bpf.tryGetPinned(Pin.SOCKS.path(dir));
        try {
            long[] c = Counters.read(bpf, counters, bpf.possibleCpus());
            long[] out = java.util.Arrays.copyOf(c, c.length + 1);
            out[c.length] = socks < 0 ? 0 : countKeys(bpf, socks, SockKeyLayout.LAYOUT.byteSize());
            return out;
        } finally {
            LibC.close(counters);
            LibC.close(socks);
        }
    }

    public static boolean isAgentOwned(Path dir) {
        return Files.exists(dir.resolve(AGENT_PIN));
    }

    /** Marks the pin directory as an agent's (pins the meta map once more as {@value #AGENT_PIN}). */
    static void markAgentOwned(Libbpf bpf, Path dir, int metaFd) throws IOException {
        if (!isAgentOwned(dir)) {
            bpf.pin(metaFd, dir.resolve(AGENT_PIN).toString());
        }
    }

    /**
     * Under the setup lock, having left the user locks: detaches the cgroup link when no other
     * process of that cgroup remains, and removes the pins when no user remains and no socket is
     * registered.
     *
     * @param socksFd the SOCKHASH, to count registered sockets; -1 when it is not open
     */
    static void teardownIfLast(Libbpf bpf, Path dir, long cgroupId, LockDir locks, int socksFd) throws IOException {
        if (isAgentOwned(dir)) {
            // The agent owns pins and attachments: this process only leaves.
            locks.leaveCgroupAndCheckLast(cgroupId);
            locks.leaveUsersAndCheckLast();
            return;
        }
        if (locks.leaveCgroupAndCheckLast(cgroupId)) {
            unpinLinks(dir, cgroupId);
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
        try {
            unpinLinks(dir); // links of cgroups whose processes all died without closing
        } catch (NoSuchFileException e) {
            return;
        }
        unpinObjects(dir);
        try {
            Files.deleteIfExists(dir);
        } catch (DirectoryNotEmptyException e) {
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
            LockDir.forPinDir(dir).removeFiles(); // lock files of pins already gone
            return 0;
        }
        LockDir locks = LockDir.forPinDir(dir);
        locks.lockSetup();
        try {
            int n = 0;
            for (Path set : RetiredSets.list(dir)) {
                try (var files = Files.list(set)) {
                    n += (int) files.count();
                }
                RetiredSets.remove(set);
            }
            n += unpinLinks(dir);
            n += Files.deleteIfExists(dir.resolve(AGENT_PIN)) ? 1 : 0;
            for (Pin p : Pin.values()) {
                n += Files.deleteIfExists(dir.resolve(p.fileName)) ? 1 : 0;
            }
            try {
                Files.deleteIfExists(dir);
            } catch (DirectoryNotEmptyException e) {
                List<String> others;
                try (var files = Files.list(dir)) {
                    others = files.map(f -> f.getFileName().toString()).sorted().toList();
                }
                throw new IOException("removed " + n + " sockmap4j pins from " + dir + ", but it also holds "
                        + others + ", which sockmap4j did not make (or an older version did): remove them (rm) if "
                        + "nothing uses them, then run this again", e);
            }
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
}
