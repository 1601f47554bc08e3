package io.github.sockmap4j.testbed;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * What the kernel says is queued: a socket's {@code skmem r} (its receive memory, which counts
 * redirected bytes that its Recv-Q does not) through sock_diag as {@code ss -tm} shows it, and
 * TCP's host-wide memory from /proc/net/sockstat.
 */
public final class KernelQueues {
    private static final Pattern SKMEM_R = Pattern.compile("skmem:\\(r(\\d+),rb(\\d+)");
    private static final Pattern TCP_MEM = Pattern.compile("^TCP: .* mem (\\d+)", Pattern.MULTILINE);

    private KernelQueues() {
    }

    /** The receive memory of the established socket whose local port is {@code port}; -1 if none. */
    public static long receiveMemory(int port) throws IOException, InterruptedException {
        return largestReceiveMemory(port)[0];
    }

    /**
     * The largest receive memory among established sockets whose local port is {@code port},
     * and that socket's receive buffer (skmem r and rb).
     */
    public static long[] largestReceiveMemory(int port) throws IOException, InterruptedException {
        return largest("sport = :" + port);
    }

    /** skmem r and rb of the established socket whose peer's port is {@code port} (a client of it). */
    public static long[] peerReceiveMemory(int port) throws IOException, InterruptedException {
        return largest("dport = :" + port);
    }

    private static long[] largest(String filter) throws IOException, InterruptedException {
        Process p = new ProcessBuilder("ss", "-tmnH", "state", "established", "( " + filter + " )")
                .redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        p.waitFor(10, TimeUnit.SECONDS);
        Matcher m = SKMEM_R.matcher(out);
        long[] max = {-1, -1};
        while (m.find()) {
            long r = Long.parseLong(m.group(1));
            if (r > max[0]) {
                max[0] = r;
                max[1] = Long.parseLong(m.group(2));
            }
        }
        return max;
    }

    /** skmem r and rb of the established socket whose local port is {@code port}. */
    public static long[] receiveMemoryAndBuffer(int port) throws IOException, InterruptedException {
        return largestReceiveMemory(port);
    }


    /**
     * A /proc file in full. Files.readString sizes its read by the file's length, which procfs
     * gives as 0; on sysctl files that returns one byte.
     */
    public static String readProc(String path) throws IOException {
        try (var in = Files.newInputStream(Path.of(path))) {
            return new String(in.readAllBytes(), StandardCharsets.US_ASCII);
        }
    }

    /** net.ipv4.tcp_rmem's default: the first bound of a receiver that publishes nothing. */
    public static long tcpRmemDefault() throws IOException {
        return Long.parseLong(readProc("/proc/sys/net/ipv4/tcp_rmem").trim().split("\\s+")[1]);
    }

    /** TCP's memory in pages, host-wide (/proc/net/sockstat). */
    public static long tcpMemPages() throws IOException {
        Matcher m = TCP_MEM.matcher(readProc("/proc/net/sockstat"));
        return m.find() ? Long.parseLong(m.group(1)) : -1;
    }

    /** The pressure threshold of tcp_mem, in pages (its middle value). */
    public static long tcpMemPressurePages() throws IOException {
        String[] v = readProc("/proc/sys/net/ipv4/tcp_mem").trim().split("\\s+");
        return Long.parseLong(v[1]);
    }
}
