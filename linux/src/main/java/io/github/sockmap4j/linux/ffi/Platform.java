package io.github.sockmap4j.linux.ffi;

import java.util.Locale;

/**
 * What the native layer assumes of the machine, one table per supported architecture. The
 * socket, epoll, poll, mmap and flock constants in {@link LibC} are the kernel's generic ones
 * ({@code asm-generic}), the same on both; what differs between the two lives here:
 *
 * <pre>
 *                         x86_64        aarch64
 * O_DIRECTORY             0200000       040000
 * O_NOFOLLOW              0400000       0100000
 * struct epoll_event      packed, 12 B  natural, 16 B
 *   .data offset          4             8
 * SYS_futex               202           98
 * </pre>
 *
 * Everything else this library reads or writes is a UAPI struct laid out alike on every 64-bit
 * architecture ({@code msghdr}, {@code iovec}, {@code bpf_attr}, {@code bpf_*_info}) or a struct
 * of its own checked against the BPF object's BTF.
 *
 * <p>{@link #current()} never throws: on any other OS or architecture it is {@link #UNSUPPORTED},
 * whose {@link #unsupportedReason()} says why, and the fast path stays off with that reason.
 *
 * @param name            the architecture's name as the kernel gives it ({@code uname -m})
 * @param oDirectory      {@code O_DIRECTORY}
 * @param oNofollow       {@code O_NOFOLLOW}
 * @param epollEventSize  {@code sizeof(struct epoll_event)}
 * @param epollDataOffset {@code offsetof(struct epoll_event, data)}
 * @param sysFutex        the futex system call's number (the C library has no wrapper)
 * @param unsupportedReason null on a supported platform, else why it is not one
 */
public record Platform(String name, int oDirectory, int oNofollow, long epollEventSize, long epollDataOffset,
                       long sysFutex, String unsupportedReason) {
    public static final Platform X86_64 = new Platform("x86_64", 0x10000, 0x20000, 12, 4, 202, null);
    public static final Platform AARCH64 = new Platform("aarch64", 0x4000, 0x8000, 16, 8, 98, null);
    /**
     * Where the native layer is not meant to run: the x86_64 values, so that nothing fails to
     * initialise, behind a reason that keeps the fast path off.
     */
    public static final Platform UNSUPPORTED = new Platform("unsupported", 0x10000, 0x20000, 12, 4, 202,
            "unsupported platform");

    private static final Platform CURRENT = detect(System.getProperty("os.name", ""), System.getProperty("os.arch", ""));

    /** This JVM's platform. */
    public static Platform current() {
        return CURRENT;
    }

    public boolean supported() {
        return unsupportedReason == null;
    }

    /**
     * The table for {@code osName}/{@code osArch} as the JVM names them ({@code os.name},
     * {@code os.arch}), or an unsupported platform that says why.
     */
    public static Platform detect(String osName, String osArch) {
        if (!osName.startsWith("Linux")) {
            return new Platform(osName, UNSUPPORTED.oDirectory, UNSUPPORTED.oNofollow, UNSUPPORTED.epollEventSize,
                    UNSUPPORTED.epollDataOffset, UNSUPPORTED.sysFutex, "not Linux (os.name=" + osName + "): the sockmap fast path is a "
                    + "Linux kernel feature");
        }
        return switch (osArch.toLowerCase(Locale.ROOT)) {
            case "amd64", "x86_64" -> X86_64;
            case "aarch64", "arm64" -> AARCH64;
            default -> new Platform(osArch, UNSUPPORTED.oDirectory, UNSUPPORTED.oNofollow, UNSUPPORTED.epollEventSize,
                    UNSUPPORTED.epollDataOffset, UNSUPPORTED.sysFutex, "no table of native constants for this architecture (os.arch="
                    + osArch + "; x86_64 and aarch64 have one)");
        };
    }
}
