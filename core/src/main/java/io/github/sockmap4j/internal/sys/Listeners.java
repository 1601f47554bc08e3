package io.github.sockmap4j.internal.sys;

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

/**
 * Who listens on a TCP port, in the network namespaces of a set of processes: from each
 * namespace's {@code /proc/PID/net/tcp} and {@code tcp6} (state 0A), which give the owner's uid.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
public final class Listeners {
    private static final String LISTEN = "0A";

    private Listeners() {
    }

    /** A listening socket: its owner's uid and its address ({@code 0.0.0.0} or {@code ::}: every one). */
    public record Listener(int uid, InetAddress address, int port) {
    }

    /**
     * The listeners on {@code port} in this process's namespace, those of the processes of
     * {@code cgroups} (and below), and that of each of {@code pids}.
     */
    public static List<Listener> on(int port, List<Path> cgroups, long... pids) {
        // Each user's first namespaces only, as the watcher looks in (NetnsDiags.boundedPerUser): a
        // request's cost does not grow with the namespaces another user makes.
        Map<Long, Long> namespaces = new LinkedHashMap<>(NetnsDiags.boundedPerUser(NetnsDiags.namespaces(cgroups),
                UserNamespaces::ownerBelowOurs));
        List<Long> who = new ArrayList<>(List.of(ProcessHandle.current().pid()));
        for (long p : pids) {
            who.add(p);
        }
        for (long p : who) {
            try {
                namespaces.putIfAbsent(NetnsDiags.inodeOf(Long.toString(p)), p);
            } catch (IOException gone) {
                // The process ended.
            }
        }
        List<Listener> out = new ArrayList<>();
        for (long pid : namespaces.values()) {
            for (String file : new String[] {"tcp", "tcp6"}) {
                try (InputStream in = Files.newInputStream(Path.of("/proc", Long.toString(pid), "net", file))) {
                    scan(in, port, out);
                } catch (IOException gone) {
                    // The process ended, or no IPv6.
                }
            }
        }
        return out;
    }

    /** The listeners on {@code port} in the text of a {@code /proc/net/tcp} or {@code tcp6} file. */
    static List<Listener> parse(String procNetTcp, int port) {
        List<Listener> out = new ArrayList<>();
        try {
            scan(new java.io.ByteArrayInputStream(procNetTcp.getBytes(StandardCharsets.US_ASCII)), port, out);
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e); // not from memory
        }
        return out;
    }

    /** Longer than any line of the format (an IPv6 line is about 180 bytes): such a line is skipped. */
    private static final int MAX_LINE = 512;

    /**
     * Adds the listeners on {@code port} of a {@code /proc/net/tcp} or {@code tcp6} stream to
     * {@code out}, a line at a time in one reused buffer: a namespace with tens of thousands of
     * sockets costs a pass over its bytes and no object per line (a user can make that many
     * listeners in a namespace of its own, and each bounded request of its reads them).
     */
    static void scan(InputStream in, int port, List<Listener> out) throws IOException {
        byte[] chunk = new byte[1 << 16];
        byte[] line = new byte[MAX_LINE];
        int[] start = new int[8];
        int[] end = new int[8];
        int len = 0;
        boolean tooLong = false;
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
                if (!tooLong) {
                    Listener l = listenerOn(line, len, port, start, end);
                    if (l != null) {
                        out.add(l);
                    }
                }
                len = 0;
                tooLong = false;
            }
        }
        if (len > 0 && !tooLong) {
            Listener l = listenerOn(line, len, port, start, end);
            if (l != null) {
                out.add(l);
            }
        }
    }

    /**
     * The listener a line describes when it is one on {@code port}, else null. Fields:
     * sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
     */
    private static Listener listenerOn(byte[] line, int len, int port, int[] start, int[] end) {
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
            return null;
        }
        if (end[7] == 0) {
            end[7] = len;
        }
        if (end[3] - start[3] != 2 || line[start[3]] != LISTEN.charAt(0) || line[start[3] + 1] != LISTEN.charAt(1)) {
            return null;
        }
        int colon = -1;
        for (int i = start[1]; i < end[1]; i++) {
            if (line[i] == ':') {
                colon = i;
            }
        }
        if (colon < 0) {
            return null;
        }
        int p = 0;
        for (int i = colon + 1; i < end[1]; i++) {
            int d = Character.digit(line[i], 16);
            if (d < 0 || (p = p * 16 + d) > 0xFFFF) {
                return null;
            }
        }
        if (p != port) {
            return null; // most lines of a namespace full of listeners: decided without an object
        }
        try {
            return new Listener(Integer.parseInt(new String(line, start[7], end[7] - start[7], StandardCharsets.US_ASCII)),
                    address(new String(line, start[1], colon - start[1], StandardCharsets.US_ASCII)), port);
        } catch (UnknownHostException | NumberFormatException e) {
            return null; // not a line of the format: skipped
        }
    }

    /** The kernel prints each 32-bit word of the address in host order (little-endian here). */
    private static InetAddress address(String hex) throws UnknownHostException {
        byte[] b = new byte[hex.length() / 2];
        for (int w = 0; w < b.length / 4; w++) {
            long word = Long.parseLong(hex.substring(w * 8, w * 8 + 8), 16);
            for (int i = 0; i < 4; i++) {
                b[w * 4 + i] = (byte) (word >>> (8 * i));
            }
        }
        return InetAddress.getByAddress(b);
    }
}
