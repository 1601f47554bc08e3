package io.github.sockmap4j.linux.bpf;

import io.github.sockmap4j.linux.ffi.Errno;
import io.github.sockmap4j.linux.ffi.Libbpf;
import io.github.sockmap4j.linux.ffi.LibbpfLog;
import io.github.sockmap4j.linux.ffi.NativeIOException;
import java.io.IOException;
import java.io.InputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Loads the embedded BPF object (or, where the kernel refuses its drain check, the one built
 * without it) and pins its maps and programs: the making of a pin directory's objects, which
 * {@link Pins} calls under the setup lock.
 */
public final class ObjectLoader {
    static final String OBJECT_RESOURCE = "sockmap4j.bpf.o";
    /** The same programs built with SM4J_NO_DRAIN, for kernels that refuse the other. */
    static final String NODRAIN_RESOURCE = "sockmap4j-nodrain.bpf.o";
    private static final Logger LOG = LoggerFactory.getLogger(ObjectLoader.class);

    private ObjectLoader() {
    }

    /** The load of the object with the drain check failed: the caller loads the one without. */
    private static final class DrainUnloadable extends IOException {
        private static final long serialVersionUID = 1L;

        DrainUnloadable(IOException cause) {
            super(cause.getMessage(), cause);
        }
    }

    /**
     * Loads the embedded object and pins its maps and programs in {@code dir}. Where the kernel
     * refuses it (no untrusted kptrs, before 6.3), it loads the one built without the drain check
     * (SM4J_NO_DRAIN): senders held on TCP then resume on a watcher's estimate only, and
     * -Dsockmap4j.drain=false chooses that one everywhere.
     */
    static void create(Libbpf bpf, Path dir, int maxSockets) throws IOException {
        if (!Boolean.parseBoolean(System.getProperty("sockmap4j.drain", "true"))) {
            create(bpf, dir, maxSockets, NODRAIN_RESOURCE);
            return;
        }
        try {
            LibbpfLog.expectingFailure(() -> {
                create(bpf, dir, maxSockets, OBJECT_RESOURCE);
                return null;
            });
        } catch (DrainUnloadable e) {
            LOG.info("This kernel refuses the sockmap4j programs' drain check ({}); loading them without it: a "
                    + "sender held on TCP resumes on a watcher's estimate only (the verifier's log is at DEBUG "
                    + "on io.github.sockmap4j.libbpf)", e.getMessage());
            create(bpf, dir, maxSockets, NODRAIN_RESOURCE);
        }
    }

    private static void create(Libbpf bpf, Path dir, int maxSockets, String resource) throws IOException {
        boolean drain = resource.equals(OBJECT_RESOURCE);
        byte[] elf = embeddedObject(resource);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment buf = arena.allocate(elf.length, 8);
            MemorySegment.copy(elf, 0, buf, ValueLayout.JAVA_BYTE, 0, elf.length);
            MemorySegment obj = bpf.openObject(buf);
            List<Pin> pinned = new ArrayList<>();
            try {
                for (Pin p : new Pin[] {Pin.SOCKS, Pin.RX, Pin.SLOTS, Pin.WATCH}) {
                    bpf.setMaxEntries(bpf.findMap(obj, p.objectName), maxSockets);
                }
                // A socket's proof outlives its SOCKHASH entry from close(2) to the end of TCP's close.
                bpf.setMaxEntries(bpf.findMap(obj, "sm4j_pair"), 2 * maxSockets);
                if (drain) {
                    bpf.setMaxEntries(bpf.findMap(obj, "sm4j_rxsock"), maxSockets);
                }
                // The programs read their configuration as constants: no lookup per message.
                MemorySegment cfg = arena.allocate(WatchLayout.CONFIG);
                cfg.set(ValueLayout.JAVA_INT, WatchLayout.CONFIG_WATCH_BOUND, defaultWatchBound());
                cfg.set(ValueLayout.JAVA_INT, WatchLayout.CONFIG_WATCH_CEILING, watchCeiling());
                // No one fills the map for others: a share (a user, a pod) holds a quarter of it.
                cfg.set(ValueLayout.JAVA_INT, WatchLayout.CONFIG_SHARE_MAX, shareMax(maxSockets));
                cfg.set(ValueLayout.JAVA_LONG, WatchLayout.CONFIG_HOST_NETNS,
                        io.github.sockmap4j.linux.sys.NetnsCookie.here());
                bpf.setInitialValue(bpf.findMap(obj, Pin.CONFIG.objectName), cfg);
                try {
                    bpf.loadObject(obj);
                } catch (NativeIOException e) {
                    throw drain ? new DrainUnloadable(e) : e;
                }
                int socks = bpf.mapFd(bpf.findMap(obj, Pin.SOCKS.objectName));
                int redirect = bpf.programFd(bpf.findProgram(obj, Pin.REDIRECT.objectName));
                bpf.progAttach(redirect, socks, Libbpf.BPF_SK_MSG_VERDICT);
                // Every address may be a local peer until an agent that knows the node's pods says which.
                LocalPeersMap.allowEverywhere(bpf, bpf.mapFd(bpf.findMap(obj, Pin.LOCAL.objectName)));
                MemorySegment key = arena.allocate(ValueLayout.JAVA_INT);
                MemorySegment val = arena.allocateFrom(ValueLayout.JAVA_INT, Pins.ABI_VERSION);
                int r = bpf.tryMapUpdate(bpf.mapFd(bpf.findMap(obj, Pin.META.objectName)), key, val, Libbpf.BPF_ANY);
                if (r < 0) {
                    throw Errno.error("bpf_map_update_elem(meta)", r);
                }
                for (Pin p : Pin.values()) {
                    int fd = p.program ? bpf.programFd(bpf.findProgram(obj, p.objectName))
                            : bpf.mapFd(bpf.findMap(obj, p.objectName));
                    bpf.pin(fd, p.path(dir));
                    pinned.add(p);
                }
            } catch (IOException | RuntimeException e) {
                for (Pin p : pinned) {
                    Files.deleteIfExists(dir.resolve(p.fileName));
                }
                throw e;
            } finally {
                bpf.closeObject(obj);
            }
        }
        LOG.debug("Loaded the sockmap4j programs ({}) and pinned them in {}", resource, dir);
    }

    /** The compiled BPF object embedded in this jar. */
    public static byte[] embeddedObject() throws IOException {
        return embeddedObject(OBJECT_RESOURCE);
    }

    /** A compiled BPF object of this jar, by its resource name in this package. */
    static byte[] embeddedObject(String resource) throws IOException {
        try (InputStream in = Pins.class.getResourceAsStream(resource)) {
            if (in == null) {
                throw new IOException("the BPF object " + resource
                        + " is missing from the sockmap4j-linux jar (a broken build)");
            }
            return in.readAllBytes();
        }
    }

    /**
     * The first bound of a receiver that publishes nothing: net.ipv4.tcp_rmem's default, the
     * receive buffer TCP gives a socket before autotuning (131072 where unset).
     */
    static int defaultWatchBound() {
        return tcpRmem(1, 131072);
    }

    /**
     * Entries of a SOCKHASH of {@code maxSockets} one share may hold: a quarter, so that a user,
     * a pod or one user's namespaces leave three quarters to the others (two entries a connection).
     */
    public static int shareMax(int maxSockets) {
        return Math.max(2, maxSockets / 4);
    }

    /**
     * The largest bound a receiver that publishes nothing grows to: net.ipv4.tcp_rmem's maximum,
     * the largest receive buffer TCP's autotuning gives (6 MiB where unset).
     */
    public static int watchCeiling() {
        return tcpRmem(2, 6 << 20);
    }

    private static int tcpRmem(int field, int otherwise) {
        try (var in = Files.newInputStream(Path.of("/proc/sys/net/ipv4/tcp_rmem"))) {
            String[] f = new String(in.readAllBytes(), StandardCharsets.US_ASCII).trim().split("\\s+");
            return Integer.parseInt(f[field]);
        } catch (IOException | RuntimeException e) {
            return otherwise;
        }
    }
}
