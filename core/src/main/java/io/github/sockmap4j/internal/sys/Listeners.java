package io.github.sockmap4j.internal.sys;

import java.io.IOException;
import java.net.InetAddress;
import java.net.UnknownHostException;
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
        Map<Long, Long> namespaces = new LinkedHashMap<>(NetnsDiags.namespaces(cgroups));
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
                try {
                    out.addAll(parse(Files.readString(Path.of("/proc", Long.toString(pid), "net", file)), port));
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
        for (String line : procNetTcp.split("\n")) {
            String[] f = line.trim().split("\\s+");
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
            if (f.length < 8 || !f[3].equals(LISTEN)) {
                continue;
            }
            int colon = f[1].indexOf(':');
            if (colon < 0 || Integer.parseInt(f[1].substring(colon + 1), 16) != port) {
                continue;
            }
            try {
                out.add(new Listener(Integer.parseInt(f[7]), address(f[1].substring(0, colon)), port));
            } catch (UnknownHostException | NumberFormatException e) {
                // Not a line of the format: skipped.
            }
        }
        return out;
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
