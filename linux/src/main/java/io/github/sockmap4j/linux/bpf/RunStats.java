package io.github.sockmap4j.linux.bpf;

import io.github.sockmap4j.linux.ffi.LibC;
import io.github.sockmap4j.linux.ffi.Libbpf;
import java.io.Closeable;
import java.io.IOException;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The kernel's per-program run statistics ({@code BPF_ENABLE_STATS}: {@code run_cnt} and
 * {@code run_time_ns} of every program), counted while a handle this class returns is open in any
 * process, at the cost of a clock read per program run. Scoped to the handle, unlike the
 * {@code kernel.bpf_stats_enabled} sysctl, which is the host's.
 */
public final class RunStats {
    private RunStats() {
    }

    /**
     * Turns the statistics on until the returned handle is closed or this process exits. Needs
     * CAP_SYS_ADMIN.
     *
     * @throws IOException naming the missing privilege or libbpf's error
     */
    public static Closeable enable(Libbpf bpf) throws IOException {
        int fd;
        try {
            fd = bpf.enableRunStats();
        } catch (IOException e) {
            throw new IOException("cannot turn on BPF run statistics (needs CAP_SYS_ADMIN): " + e.getMessage(), e);
        }
        AtomicBoolean open = new AtomicBoolean(true);
        return () -> {
            if (open.getAndSet(false)) {
                LibC.close(fd);
            }
        };
    }
}
