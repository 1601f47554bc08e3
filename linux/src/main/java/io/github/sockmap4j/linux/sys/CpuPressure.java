package io.github.sockmap4j.linux.sys;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Optional;

/**
 * How long tasks have waited for a CPU, as the kernel counts it for this process: the "some" line
 * of its cgroup's {@code cpu.pressure} (the time at least one of the cgroup's tasks was runnable
 * and not running), else of the host's {@code /proc/pressure/cpu}; where the kernel keeps no
 * pressure (built without PSI, or booted with {@code psi=0}, as Debian's kernels are unless
 * given {@code psi=1}), an estimate from {@code /proc/loadavg}: the time between two reads
 * counts as waited when more tasks were runnable at the read than there are CPUs. What polling
 * loops read to stop polling while the CPUs are busy.
 *
 * <p>Reads only files a process may read about itself and its host; writes nothing.
 *
 * <p><b>Note:</b> not threadsafe: one reader at a time.
 */
public final class CpuPressure implements AutoCloseable {
    /** Where the figures come from. */
    public enum Source {
        /** This process's cgroup (v2) {@code cpu.pressure}. */
        CGROUP,
        /** The host's {@code /proc/pressure/cpu}. */
        HOST,
        /** Runnable tasks in {@code /proc/loadavg} against the CPUs, sampled at each read. */
        LOADAVG
    }

    private final Source source;
    private final Path file;
    private final FileChannel channel;
    private final ByteBuffer buf = ByteBuffer.allocate(256);
    private final int cpus;
    private long estimateMicros;
    private long lastReadNanos;

    private CpuPressure(Source source, Path file, FileChannel channel, int cpus) {
        this.source = source;
        this.file = file;
        this.channel = channel;
        this.cpus = cpus;
    }

    /**
     * The first source that reads: this process's cgroup, the host, /proc/loadavg.
     *
     * @return an open reader
     * @throws IOException where not even /proc/loadavg reads (no /proc)
     */
    public static CpuPressure open() throws IOException {
        Optional<Path> cgroup = Optional.empty();
        try {
            cgroup = Cgroups.ownCgroupDir().map(d -> d.resolve("cpu.pressure"));
        } catch (IOException | RuntimeException e) {
            // No cgroup v2 here: the host's figures.
        }
        if (cgroup.isPresent()) {
            CpuPressure p = tryOpen(Source.CGROUP, cgroup.get());
            if (p != null) {
                return p;
            }
        }
        CpuPressure host = tryOpen(Source.HOST, Path.of("/proc/pressure/cpu"));
        if (host != null) {
            return host;
        }
        CpuPressure load = new CpuPressure(Source.LOADAVG, Path.of("/proc/loadavg"),
                FileChannel.open(Path.of("/proc/loadavg"), StandardOpenOption.READ), Runtime.getRuntime().availableProcessors());
        load.stalledMicros();
        return load;
    }

    /** A PSI file that opens and reads, or null (absent, or PSI off: EOPNOTSUPP at the read). */
    private static CpuPressure tryOpen(Source source, Path file) {
        try {
            CpuPressure p = new CpuPressure(source, file, FileChannel.open(file, StandardOpenOption.READ), 0);
            try {
                p.stalledMicros();
                return p;
            } catch (IOException | RuntimeException e) {
                p.close();
                return null;
            }
        } catch (IOException | RuntimeException e) {
            return null;
        }
    }

    public Source source() {
        return source;
    }

    public Path file() {
        return file;
    }

    /**
     * Microseconds that tasks have waited for a CPU so far: the kernel's count, or this reader's
     * estimate since it opened ({@link Source#LOADAVG}). Only differences between two reads mean
     * anything.
     *
     * @return the total so far, never less than at the read before
     * @throws IOException if the file no longer reads
     */
    public long stalledMicros() throws IOException {
        String text = readAll();
        if (source == Source.LOADAVG) {
            long now = System.nanoTime();
            if (lastReadNanos != 0 && runnable(text) > cpus) {
                estimateMicros += (now - lastReadNanos) / 1000;
            }
            lastReadNanos = now;
            return estimateMicros;
        }
        return someTotal(text);
    }

    private String readAll() throws IOException {
        buf.clear();
        long at = 0;
        int n;
        while (buf.hasRemaining() && (n = channel.read(buf, at)) > 0) {
            at += n;
        }
        return new String(buf.array(), 0, buf.position(), StandardCharsets.US_ASCII);
    }

    /** The {@code total=} of the "some" line of a PSI file, in microseconds. */
    static long someTotal(String psi) {
        int line = psi.startsWith("some ") ? 0 : psi.indexOf("\nsome ") + 1;
        if (line < 0 || !psi.startsWith("some ", line)) {
            throw new IllegalArgumentException("no 'some' line in a pressure file: " + psi.strip());
        }
        int end = psi.indexOf('\n', line);
        String some = end < 0 ? psi.substring(line) : psi.substring(line, end);
        int at = some.indexOf("total=");
        if (at < 0) {
            throw new IllegalArgumentException("no total in a pressure line: " + some);
        }
        return Long.parseLong(some.substring(at + 6).strip());
    }

    /** The runnable tasks in /proc/loadavg's fourth field ("runnable/all"), the reader included. */
    static int runnable(String loadavg) {
        String[] f = loadavg.strip().split(" ");
        if (f.length < 4 || f[3].indexOf('/') < 0) {
            throw new IllegalArgumentException("not /proc/loadavg: " + loadavg.strip());
        }
        return Integer.parseInt(f[3].substring(0, f[3].indexOf('/')));
    }

    @Override
    public void close() {
        try {
            channel.close();
        } catch (IOException ignored) {
            // A read-only file: nothing was left unwritten.
        }
    }

    @Override
    public String toString() {
        return "CpuPressure[" + source + " " + file + "]";
    }
}
