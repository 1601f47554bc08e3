package io.github.sockmap4j.linux.bpf;

import io.github.sockmap4j.linux.ffi.Errno;
import io.github.sockmap4j.linux.ffi.LibC;
import io.github.sockmap4j.linux.ffi.Libbpf;
import io.github.sockmap4j.linux.ffi.Linux;
import io.github.sockmap4j.linux.net.NativeSocket;
import io.github.sockmap4j.linux.net.SocketIdentity;
import io.github.sockmap4j.linux.sys.Cgroups;
import io.github.sockmap4j.linux.sys.Ownership;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.OptionalInt;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One process's handle on a pin directory: its objects opened ({@link Pins} creates and tears
 * them down), its cgroup attached, the policy rules this process opted in (counted, so that
 * the last opt-out of a rule removes it), and the in-flight maps ({@link #inFlight()}).
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
public final class KernelSockmap implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(KernelSockmap.class);

    private final Libbpf bpf;
    private final Path pinDir;
    private final Path cgroupDir;
    private final long cgroupId;
    private final LockDir locks;
    private final PinnedObjects fds;
    private final PolicyMap policy;
    private final InFlightMaps inFlight;
    private final int possibleCpus;
    private final Map<PolicyRule, Integer> policyRefs = new HashMap<>();
    private boolean closed;

    private KernelSockmap(Libbpf bpf, Path pinDir, Path cgroupDir, long cgroupId, LockDir locks, PinnedObjects fds)
            throws IOException {
        this.bpf = bpf;
        this.pinDir = pinDir;
        this.cgroupDir = cgroupDir;
        this.cgroupId = cgroupId;
        this.locks = locks;
        this.fds = fds;
        this.possibleCpus = bpf.possibleCpus();
        this.inFlight = new InFlightMaps(bpf, fds);
        this.policy = new PolicyMap(bpf, fds.policy());
    }

    /**
     * Opens (or creates) the pinned objects in {@code pinDir} and attaches the sockops program
     * to {@code cgroupDir}.
     */
    public static KernelSockmap open(Libbpf bpf, Path pinDir, Path cgroupDir, int maxSockets) throws IOException {
        return open(bpf, pinDir, cgroupDir, maxSockets, false);
    }

    /**
     * The same; {@code agent}: the caller owns the directory, and pins of another ABI version
     * are retired, not refused ({@link RetiredSets#retire}).
     */
    public static KernelSockmap open(Libbpf bpf, Path pinDir, Path cgroupDir, int maxSockets, boolean agent)
            throws IOException {
        Path cg = cgroupDir.toAbsolutePath().normalize();
        Cgroups.checkV2(cg);
        long cgroupId = Cgroups.id(cg);
        // Refused before anything is made for it (a lock directory); checked again, by descriptor,
        // as it is created under the setup lock.
        checkPinDirectory(pinDir, Ownership.checkExisting(pinDir, "pin directory"));
        LockDir locks = LockDir.forPinDir(pinDir);
        locks.lockSetup();
        PinnedObjects fds = null;
        boolean ours = false;
        try {
            locks.joinUsers(cgroupId);
            checkPinDirectory(pinDir, Ownership.ensureDirectory(pinDir, "pin directory", 0750));
            ours = true;
            fds = Pins.openOrCreate(bpf, pinDir, maxSockets, agent);
            Pins.attachCgroup(bpf, pinDir, cg, cgroupId, fds.cgroupPrograms());
            return new KernelSockmap(bpf, pinDir, cg, cgroupId, locks, fds);
        } catch (IOException | RuntimeException e) {
            if (fds != null) {
                fds.closeAllButPolicy();
                LibC.close(fds.policy());
            }
            try {
                if (ours) {
                    Pins.teardownIfLast(bpf, pinDir, cgroupId, locks, -1);
                } else {
                    // A directory refused is left as it is (its owner is told to remove it); only the locks go.
                    locks.leaveCgroupAndCheckLast(cgroupId);
                    if (locks.leaveUsersAndCheckLast()) {
                        locks.removeFiles();
                    }
                }
            } catch (IOException suppressed) {
                e.addSuppressed(suppressed);
            }
            locks.close();
            throw e;
        } finally {
            locks.unlockSetup();
        }
    }

    /** Refuses a pin directory outside a BPF file system, where pinning fails with a misleading EPERM. */
    private static void checkPinDirectory(Path pinDir, long fsType) throws IOException {
        if (fsType != Linux.BPF_FS_MAGIC) {
            throw new IOException("the pin directory " + pinDir + " is not on a BPF file system (bpffs; its file "
                    + "system type is 0x" + Long.toHexString(fsType) + "): choose one under /sys/fs/bpf, or mount "
                    + "bpffs where it should be (as root: mount -t bpf bpf DIR)");
        }
    }

    /** Marks the pin directory as an agent's: no other process tears it down. */
    public synchronized void markAgentOwned() throws IOException {
        ensureOpen();
        Pins.markAgentOwned(bpf, pinDir, fds.meta());
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

    /** Whether the pinned link attaching the cgroup is still there (a forced removal takes it). */
    public boolean isAttached() {
        return java.nio.file.Files.exists(pinDir.resolve(Pins.linkName(cgroupId)));
    }

    /** The in-flight bound's maps. */
    public InFlightMaps inFlight() {
        return inFlight;
    }

    /**
     * Opts a server endpoint in with an in-flight bound in bytes (0: each receiver's
     * SO_RCVBUF; {@link PolicyKeyLayout#UNBOUNDED}: none). Rules are counted in this process:
     * the entry leaves the kernel when the last {@link #optOut} of the same rule runs; the bound
     * of an existing rule is replaced when one is given.
     */
    public synchronized PolicyRule optIn(PolicyRule rule, int bound) throws IOException {
        ensureOpen();
        Integer refs = policyRefs.get(rule);
        if (refs == null || bound != 0) {
            policy.put(rule, bound);
        }
        policyRefs.put(rule, refs == null ? 1 : refs + 1);
        return rule;
    }

    public synchronized PolicyRule optIn(PolicyRule rule) throws IOException {
        return optIn(rule, 0);
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
     * The bound of the policy entry matching this server endpoint: empty when none matches,
     * 0 when it leaves the bound to the receiver, {@link PolicyKeyLayout#UNBOUNDED} when it
     * turns the bound off.
     */
    public OptionalInt policyBound(InetAddress server, int port) {
        long b = policy.boundFor(server, port);
        return b < 0 ? OptionalInt.empty() : OptionalInt.of((int) b);
    }

    /** Whether a policy entry matches this server endpoint (as the kernel decides it). */
    public boolean policyAllows(InetAddress server, int port) {
        return policy.boundFor(server, port) >= 0;
    }

    /** The socket cookie stored under this key, or 0 when the key is absent. */
    public long lookupSocket(InetAddress local, int localPort, InetAddress remote, int remotePort, long netns) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment key = arena.allocate(SockKeyLayout.LAYOUT);
            SockKeyLayout.fill(key, local, localPort, remote, remotePort, netns);
            MemorySegment val = arena.allocate(ValueLayout.JAVA_LONG);
            return bpf.tryMapLookup(fds.socks(), key, val) == 0 ? val.get(ValueLayout.JAVA_LONG, 0) : 0L;
        }
    }

    /**
     * Takes the socket under this key out of the SOCKHASH (the kernel's close-time cleanup does
     * that otherwise): its sends go by TCP from then on. The start-up probe's way of putting TCP
     * bytes into a socket that stays registered. True when an entry was removed.
     */
    public boolean removeSocket(InetAddress local, int localPort, InetAddress remote, int remotePort, long netns) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment key = arena.allocate(SockKeyLayout.LAYOUT);
            SockKeyLayout.fill(key, local, localPort, remote, remotePort, netns);
            return bpf.tryMapDelete(fds.socks(), key) == 0;
        }
    }

    /**
     * The connected {@code socket} as the kernel keys it: its addresses, with the endpoint a
     * translated connect went to as its peer (getpeername reports the Service it dialed, which
     * names no socket), its namespace and cookie. Two system calls and a map lookup.
     */
    public SocketIdentity identity(NativeSocket socket) throws IOException {
        return identity(socket, false);
    }

    /**
     * As {@link #identity(NativeSocket)}; an {@code accepted} socket was never translated (connects are),
     * so it skips the map lookup.
     */
    public SocketIdentity identity(NativeSocket socket, boolean accepted) throws IOException {
        SocketIdentity id = socket.identity();
        if (accepted || id.cookie() == 0) {
            return id;
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment key = arena.allocateFrom(ValueLayout.JAVA_LONG, id.cookie());
            MemorySegment v = arena.allocate(ServiceLayout.SOCK);
            if (bpf.tryMapLookup(fds.svcSock(), key, v) != 0) {
                return id;
            }
            InetAddress ep = InetAddress.getByAddress(v.asSlice(ServiceLayout.SOCK_EP_ADDR, 16)
                    .toArray(ValueLayout.JAVA_BYTE));
            return new SocketIdentity(id.local(), new java.net.InetSocketAddress(ep,
                    v.get(ValueLayout.JAVA_INT, ServiceLayout.SOCK_EP_PORT)), id.netns(), id.cookie());
        }
    }

    /** Whether the socket {@code id} names is in the SOCKHASH under its own key (its cookie there). */
    public boolean holds(SocketIdentity id) {
        return id.cookie() != 0 && lookupSocket(id.local().getAddress(), id.local().getPort(),
                id.remote().getAddress(), id.remote().getPort(), id.netns()) == id.cookie();
    }

    /** Whether a socket is in the SOCKHASH under the key of {@code id}'s peer (its key reversed). */
    public boolean holdsPeerOf(SocketIdentity id) {
        return lookupSocket(id.remote().getAddress(), id.remote().getPort(), id.local().getAddress(),
                id.local().getPort(), id.netns()) != 0;
    }

    /** Whether a socket is in the SOCKHASH under {@code key} (a {@link SockKeyLayout}). A system call. */
    public boolean isRegistered(MemorySegment key, MemorySegment cookieScratch) {
        return bpf.tryMapLookup(fds.socks(), key, cookieScratch) == 0;
    }

    /** How many sockets the SOCKHASH holds now. */
    public int registeredSockets() {
        return Pins.countKeys(bpf, fds.socks(), SockKeyLayout.LAYOUT.byteSize());
    }

    /** The per-CPU counters, summed, in {@link Counter} order. */
    public long[] counters() {
        return Counters.read(bpf, fds.counters(), possibleCpus);
    }

    public int sockopsProgramFd() {
        return fds.sockops();
    }

    public int redirectProgramFd() {
        return fds.redirect();
    }

    private void ensureOpen() throws IOException {
        if (closed) {
            throw new IOException("the sockmap4j kernel handle for " + pinDir + " is closed");
        }
    }

    /**
     * Removes this process's rules and leaves the pin directory: the last user of a cgroup
     * detaches it, the last user of all removes the pins ({@link Pins#teardownIfLast}).
     */
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
            Pins.teardownIfLast(bpf, pinDir, cgroupId, locks, fds.socks());
        } finally {
            inFlight.close();
            policy.close();
            fds.closeAllButPolicy();
            locks.unlockSetup();
            locks.close();
        }
    }
}
