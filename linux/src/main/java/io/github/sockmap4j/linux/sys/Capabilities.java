package io.github.sockmap4j.linux.sys;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** The effective capabilities of this process, from /proc/self/status. */
public final class Capabilities {
    public static final int CAP_NET_ADMIN = 12;
    public static final int CAP_SYS_ADMIN = 21;
    public static final int CAP_BPF = 39;

    private final long effective;

    private Capabilities(long effective) {
        this.effective = effective;
    }

    public static Capabilities current() throws IOException {
        for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
            if (line.startsWith("CapEff:")) {
                return new Capabilities(Long.parseUnsignedLong(line.substring(7).trim(), 16));
            }
        }
        throw new IOException("no CapEff line in /proc/self/status");
    }

    public boolean has(int cap) {
        return (effective & (1L << cap)) != 0;
    }

    /** CAP_BPF, or CAP_SYS_ADMIN which implies it on kernels before 5.8. */
    public boolean canBpf() {
        return has(CAP_BPF) || has(CAP_SYS_ADMIN);
    }
}
