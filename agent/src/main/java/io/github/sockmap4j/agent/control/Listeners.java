package io.github.sockmap4j.agent.control;

import io.github.sockmap4j.linux.sys.NetnsDiags;

import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Who listens on a TCP port, in the network namespaces of a set of processes: from each
 * namespace's {@code /proc/PID/net/tcp} and {@code tcp6} (state 0A), which give the owner's uid.
 *
 * <p>What reading costs is bounded whoever made the namespaces and whoever asks:
 * <ul>
 * <li>the kernel prints a namespace's listening sockets before any other (its listening hash, then
 *     its established one), so a read stops at the first socket that is not listening:
 *     connections cost nothing;</li>
 * <li>past {@value #MAX_PER_FILE} listeners in one file a namespace is {@linkplain NotRead too many
 *     to read}, so one read costs at most that many of the kernel's lines;</li>
 * <li>a read is charged what its lines cost ({@link #costNanos}: 2-3 &micro;s a line, measured),
 *     and reads take at most {@value #CPU_PERCENT}% of a CPU so charged: after reads charged c,
 *     the next wait {@code (100 / CPU_PERCENT - 1) * c}. A namespace's
 *     first read is owed. What a namespace holds is used again without asking for
 *     {@value #FRESH_MILLIS} ms, and up to {@value #STALE_MILLIS} ms while the share is spent;
 *     older than that, a request is refused ({@link NotRead}) until it can be read. A request the
 *     share allows reads every namespace older than the fresh time;</li>
 * <li>the requester's own namespace, where a server it has just started is, is read again at
 *     each request, from a share of its own of the same size (a tenth of a CPU for both): so a
 *     user's requests do not make what others read old, nor the reverse.</li>
 * </ul>
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
public final class Listeners {
    private static final String LISTEN = "0A";
    /** The most listeners read from one namespace's {@code tcp} or {@code tcp6}. */
    public static final int MAX_PER_FILE = 16_384;
    /** How long what a namespace holds is used without asking. */
    public static final long FRESH_MILLIS = 1000;
    /** How long at most what a namespace holds is used, whatever reads cost. */
    public static final long STALE_MILLIS = 5000;
    /** The share of one CPU each of the two kinds of reads takes at most (so a tenth for both). */
    static final int CPU_PERCENT = 5;
    /** What a read is charged besides its lines: opening the file and the first page. */
    static final long READ_NANOS = TimeUnit.MICROSECONDS.toNanos(20);
    /**
     * What a line of {@code /proc/net/tcp} costs to read: 2-3 us measured here (6.18), nine
     * tenths of it the kernel's printing ({@code vsnprintf}, {@code tcp4_seq_show}) and its walk
     * of the listening and established hashes.
     */
    static final long LINE_NANOS = TimeUnit.MICROSECONDS.toNanos(3);

    /** What a read of {@code files} files and {@code lines} lines in all is charged. */
    static long costNanos(int files, long lines) {
        return files * READ_NANOS + lines * LINE_NANOS;
    }
    /** The most listeners kept, over all namespaces. */
    static final int MAX_CACHED = 262_144;

    /** A listening socket: its owner's uid and its address ({@code 0.0.0.0} or {@code ::}: every one). */
    public record Listener(int uid, InetAddress address, int port) {
    }

    /** Nothing can be said about a namespace's listeners now: why, and what the requester may do. */
    public static final class NotRead extends RuntimeException {
        private static final long serialVersionUID = 1L;

        public NotRead(String why) {
            super(why, null, false, false);
        }

        public static NotRead tooMany(long pid) {
            return new NotRead("the network namespace of pid " + pid + " holds more than " + MAX_PER_FILE
                    + " listening sockets, more than the agent reads: only root may set a bound (other than 0, the "
                    + "receiver's own) while it does");
        }

        static NotRead busy(long pid) {
            return new NotRead("the listeners of the network namespace of pid " + pid + " were not read in the last "
                    + STALE_MILLIS / 1000 + " s (or not kept), the agent's reads of listeners having used their share "
                    + "of a CPU: ask again in a second");
        }
    }

    /** Where a namespace's files come from: {@code /proc/PID/net/FILE} of a process in it. */
    interface Source {
        InputStream open(long pid, String file) throws IOException;
    }

    /** One namespace's listening sockets at one time, packed: no object per socket. */
    private static final class Snapshot {
        final long readAtNanos;
        /** What reading it was charged, and the lines read. */
        long costNanos;
        long lines;
        int size;
        int[] ports = new int[16];
        int[] uids = new int[16];
        /** 16 bytes each; an IPv4 address as ::ffff:a.b.c.d. */
        byte[] addresses = new byte[16 * 16];
        boolean tooMany;

        Snapshot(long readAtNanos) {
            this.readAtNanos = readAtNanos;
        }

        void add(int port, int uid, byte[] line, int from, int hexChars) {
            if (size == ports.length) {
                ports = java.util.Arrays.copyOf(ports, size * 2);
                uids = java.util.Arrays.copyOf(uids, size * 2);
                addresses = java.util.Arrays.copyOf(addresses, size * 32);
            }
            ports[size] = port;
            uids[size] = uid;
            int at = size * 16;
            if (hexChars == 8) {
                addresses[at + 10] = (byte) 0xff;
                addresses[at + 11] = (byte) 0xff;
                at += 12;
            }
            // The kernel prints each 32-bit word of the address in host order (little-endian here).
            for (int w = 0; w < hexChars / 8; w++) {
                for (int i = 0; i < 4; i++) {
                    int hi = Character.digit(line[from + w * 8 + 6 - 2 * i], 16);
                    int lo = Character.digit(line[from + w * 8 + 7 - 2 * i], 16);
                    addresses[at + w * 4 + i] = (byte) (hi << 4 | lo);
                }
            }
            size++;
        }

        void select(int port, List<Listener> out) {
            for (int i = 0; i < size; i++) {
                if (ports[i] == port) {
                    try {
                        out.add(new Listener(uids[i], InetAddress.getByAddress(
                                java.util.Arrays.copyOfRange(addresses, i * 16, i * 16 + 16)), port));
                    } catch (UnknownHostException e) {
                        throw new IllegalStateException(e); // 16 bytes are always an address
                    }
                }
            }
        }
    }

    private final Source source;
    private final java.util.function.LongSupplier nanoClock;
    /** By namespace inode, least recently used first. */
    private final LinkedHashMap<Long, Snapshot> byNamespace = new LinkedHashMap<>(16, 0.75f, true);
    private final int maxCached;
    private int cached;
    /**
     * The namespaces read before, whether or not what they held is still kept (at most
     * {@value #MAX_SEEN}, least recently read first): only a namespace never read is owed a read.
     */
    private final LinkedHashMap<Long, Boolean> seen = new LinkedHashMap<>(16, 0.75f, true);
    static final int MAX_SEEN = 65_536;
    private long reads;
    /** Before this, the reads' share of a CPU is spent: a read that may wait does. */
    private long readsAllowedAt;
    /** The same for the requesters' reads of their own namespaces. */
    private long ownReadsAllowedAt;
    /** The namespaces looked into, as last listed, when, and when a listing may come sooner. */
    private Map<Long, Long> watched;
    private long watchedAt;
    private long listAllowedAt;
    private long lists;

    /** Listeners read from {@code /proc}. */
    public Listeners() {
        this((pid, file) -> Files.newInputStream(Path.of("/proc", Long.toString(pid), "net", file)), System::nanoTime);
    }

    Listeners(Source source, java.util.function.LongSupplier nanoClock) {
        this(source, nanoClock, MAX_CACHED);
    }

    Listeners(Source source, java.util.function.LongSupplier nanoClock, int maxCached) {
        this.source = source;
        this.nanoClock = nanoClock;
        this.maxCached = maxCached;
    }

    /**
     * The listeners on {@code port} in this process's namespace and in those of the processes of
     * {@code cgroups} and below, each user's first namespaces as the watcher looks in
     * ({@link NetnsDiags#lookedInto}); the namespace of {@code pid}, where it is one of them,
     * read again where the share of reads allows. A namespace past a user's first is not looked
     * into, the requester's neither.
     *
     * @throws NotRead where one of them holds more listeners than are read, or was not read for
     *                  longer than it may be used
     */
    public List<Listener> on(int port, List<Path> cgroups, long pid) {
        long requester = -1;
        try {
            requester = NetnsDiags.inodeOf(Long.toString(pid));
        } catch (IOException gone) {
            // The process ended.
        }
        return on(port, watched(() -> namespacesOf(cgroups), requester), requester);
    }

    /** This process's namespace and each owner's first of those of the processes of {@code cgroups}. */
    private static Map<Long, Long> namespacesOf(List<Path> cgroups) {
        Map<Long, Long> namespaces = new LinkedHashMap<>();
        long self = ProcessHandle.current().pid();
        try {
            namespaces.put(NetnsDiags.inodeOf(Long.toString(self)), self);
        } catch (IOException e) {
            // not without /proc
        }
        NetnsDiags.lookedInto(cgroups).forEach(namespaces::putIfAbsent);
        return namespaces;
    }

    /**
     * The namespaces looked into, listed again (a walk of the cgroups and a look at each of their
     * processes: 0.6 ms a request with a few processes, measured) once they are a fresh time
     * old, or sooner where {@code requester} is not among them (a pod's first request) and the
     * listing's own share of a CPU ({@value #CPU_PERCENT}%, by its wall time) allows.
     */
    synchronized Map<Long, Long> watched(java.util.function.Supplier<Map<Long, Long>> list, long requester) {
        long now = nanoClock.getAsLong();
        boolean stale = watched == null || now - watchedAt > TimeUnit.MILLISECONDS.toNanos(FRESH_MILLIS);
        boolean missing = watched != null && requester >= 0 && !watched.containsKey(requester);
        if (stale || missing && now - listAllowedAt >= 0) {
            watched = Map.copyOf(list.get());
            long end = nanoClock.getAsLong();
            watchedAt = now;
            listAllowedAt = end + (end - now) * (100 / CPU_PERCENT - 1);
            lists++;
        }
        return watched;
    }

    /**
     * The listeners on {@code port} in {@code namespaces} (inode to a pid in it), that of
     * {@code requester} (an inode, -1 for none) read again where the share of reads allows.
     */
    synchronized List<Listener> on(int port, Map<Long, Long> namespaces, long requester) {
        long now = nanoClock.getAsLong();
        boolean shareFree = now - readsAllowedAt >= 0;
        boolean ownShareFree = now - ownReadsAllowedAt >= 0;
        long charged = 0;
        List<Listener> out = new ArrayList<>();
        for (Map.Entry<Long, Long> ns : namespaces.entrySet()) {
            Snapshot s = byNamespace.get(ns.getKey());
            long age = s == null ? Long.MAX_VALUE : now - s.readAtNanos;
            boolean own = ns.getKey() == requester && s != null && ownShareFree;
            boolean owed = s == null && !seen.containsKey(ns.getKey());
            if (s == null && !owed && !shareFree) {
                throw NotRead.busy(ns.getValue()); // read before, not kept: read again when the share allows
            }
            if (s == null || own || shareFree && age > TimeUnit.MILLISECONDS.toNanos(FRESH_MILLIS)) {
                s = read(ns.getValue(), now);
                if (s == null) {
                    byNamespace.remove(ns.getKey());
                    continue; // the process ended
                }
                if (own) {
                    ownReadsAllowedAt = Math.max(ownReadsAllowedAt, now) + s.costNanos * (100 / CPU_PERCENT - 1);
                } else {
                    charged += s.costNanos;
                }
                keep(ns.getKey(), s);
            } else if (age > TimeUnit.MILLISECONDS.toNanos(STALE_MILLIS)) {
                throw NotRead.busy(ns.getValue());
            }
            if (s.tooMany) {
                throw NotRead.tooMany(ns.getValue());
            }
            s.select(port, out);
        }
        if (charged > 0) {
            readsAllowedAt = Math.max(readsAllowedAt, now) + charged * (100 / CPU_PERCENT - 1);
        }
        return out;
    }

    /** How many namespace reads were made: what tests read. */
    synchronized long reads() {
        return reads;
    }

    /** How many times the namespaces looked into were listed: what tests read. */
    synchronized long lists() {
        return lists;
    }

    private Snapshot read(long pid, long now) {
        Snapshot s = new Snapshot(now);
        boolean any = false;
        int files = 0;
        for (String file : new String[] {"tcp", "tcp6"}) {
            try (InputStream in = source.open(pid, file)) {
                any = true;
                files++;
                if (!scan(in, s)) {
                    s.tooMany = true;
                    break;
                }
            } catch (IOException gone) {
                // The process ended, or no IPv6.
            }
        }
        reads++;
        s.costNanos = costNanos(files, s.lines);
        return any ? s : null;
    }

    private void keep(long inode, Snapshot s) {
        seen.put(inode, Boolean.TRUE);
        if (seen.size() > MAX_SEEN) {
            seen.remove(seen.keySet().iterator().next());
        }
        Snapshot old = byNamespace.remove(inode);
        if (old != null) {
            cached -= old.size;
        }
        if (s.tooMany) {
            s.size = 0; // nothing of it is read
        }
        if (s.size > maxCached) {
            return;
        }
        var it = byNamespace.values().iterator();
        while (cached + s.size > maxCached && it.hasNext()) {
            cached -= it.next().size;
            it.remove();
        }
        byNamespace.put(inode, s);
        cached += s.size;
    }

    /** The listeners on {@code port} in the text of a {@code /proc/net/tcp} or {@code tcp6} file. */
    static List<Listener> parse(String procNetTcp, int port) {
        Snapshot s = new Snapshot(0);
        try {
            if (!scan(new java.io.ByteArrayInputStream(procNetTcp.getBytes(StandardCharsets.US_ASCII)), s)) {
                throw NotRead.tooMany(0);
            }
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e); // not from memory
        }
        List<Listener> out = new ArrayList<>();
        s.select(port, out);
        return out;
    }

    /** Longer than any line of the format (an IPv6 line is about 180 bytes): such a line is skipped. */
    private static final int MAX_LINE = 512;

    /**
     * Adds the listeners of a {@code /proc/net/tcp} or {@code tcp6} stream to {@code into}, a line
     * at a time in one reused buffer, until the first line of a socket that is not listening (the
     * kernel prints listeners first) or the end. False where the file holds more than
     * {@value #MAX_PER_FILE} listeners.
     */
    static boolean scan(InputStream in, Snapshot into) throws IOException {
        byte[] chunk = new byte[1 << 16];
        byte[] line = new byte[MAX_LINE];
        int[] start = new int[8];
        int[] end = new int[8];
        int len = 0;
        int found = 0;
        boolean tooLong = false;
        boolean header = true;
        for (int n; (n = in.read(chunk)) > 0; ) {
            for (int i = 0; i < n; i++) {
                byte b = chunk[i];
                if (b != '\n') {
                    if (len < MAX_LINE) {
                        line[len++] = b;
                    } else {
                        tooLong = true;
                    }
                    continue;
                }
                into.lines++;
                int r = tooLong || header ? SKIPPED : listener(line, len, start, end, into);
                header = false;
                if (r == OTHER_STATE) {
                    return true;
                }
                if (r == LISTENER && ++found > MAX_PER_FILE) {
                    return false;
                }
                len = 0;
                tooLong = false;
            }
        }
        if (len > 0 && !tooLong && !header && listener(line, len, start, end, into) == LISTENER) {
            found++;
        }
        return found <= MAX_PER_FILE;
    }

    private static final int LISTENER = 0;
    private static final int OTHER_STATE = 1;
    private static final int SKIPPED = 2;

    /**
     * Adds the listener a line describes to {@code into}. Fields:
     * sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
     */
    private static int listener(byte[] line, int len, int[] start, int[] end, Snapshot into) {
        java.util.Arrays.fill(end, 0);
        int field = -1;
        for (int i = 0; i < len && field < 8; i++) {
            boolean space = line[i] == ' ' || line[i] == '\t';
            if (!space && (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t')) {
                if (++field < 8) {
                    start[field] = i;
                }
            }
            if (space && field >= 0 && field < 8 && end[field] == 0) {
                end[field] = i;
            }
        }
        if (field < 7) {
            return SKIPPED;
        }
        if (end[7] == 0) {
            end[7] = len;
        }
        if (end[3] - start[3] != 2) {
            return SKIPPED;
        }
        if (line[start[3]] != LISTEN.charAt(0) || line[start[3] + 1] != LISTEN.charAt(1)) {
            return OTHER_STATE;
        }
        int colon = -1;
        for (int i = start[1]; i < end[1]; i++) {
            if (line[i] == ':') {
                colon = i;
            }
        }
        int hexChars = colon - start[1];
        if (hexChars != 8 && hexChars != 32) {
            return SKIPPED;
        }
        for (int i = start[1]; i < colon; i++) {
            if (Character.digit(line[i], 16) < 0) {
                return SKIPPED;
            }
        }
        int port = 0;
        for (int i = colon + 1; i < end[1]; i++) {
            int d = Character.digit(line[i], 16);
            if (d < 0 || (port = port * 16 + d) > 0xFFFF) {
                return SKIPPED;
            }
        }
        long uid = 0;
        for (int i = start[7]; i < end[7]; i++) {
            int d = Character.digit(line[i], 10);
            if (d < 0 || (uid = uid * 10 + d) > 0xFFFF_FFFFL) {
                return SKIPPED;
            }
        }
        if (end[7] == start[7]) {
            return SKIPPED;
        }
        into.add(port, (int) uid, line, start[1], hexChars);
        return LISTENER;
    }
}
