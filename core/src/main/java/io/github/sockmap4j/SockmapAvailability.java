package io.github.sockmap4j;

import io.github.sockmap4j.linux.sys.HostCheck;

/**
 * Whether this host can run the fast path at all, decided once per JVM, as Netty's
 * {@code Epoll} does for its transport: the operating system and architecture, libbpf, the
 * privileges to load programs, and the kernel's support for the map and program types. What
 * depends on a {@link SockmapConfig} (bpffs under the pin directory, the cgroup to attach to)
 * is checked when a {@link Sockmap} opens; {@link Sockmap#unavailabilityCause()} then says
 * which step failed.
 *
 * <pre>{@code
 * if (!SockmapAvailability.isAvailable()) {
 *     log.info("plain TCP: {}", SockmapAvailability.unavailabilityCause());
 * }
 * }</pre>
 *
 * <p><b>Note:</b> this class is threadsafe; nothing here throws from a static initializer.
 */
public final class SockmapAvailability {
    private SockmapAvailability() {
    }

    /**
     * Whether this host can run the fast path (a {@link Sockmap} may still be off for its config).
     *
     * @return true when the platform, libbpf, the privileges and the kernel all allow it
     */
    public static boolean isAvailable() {
        return HostCheck.host().cause() == null;
    }

    /**
     * Why this host cannot run the fast path.
     *
     * @return the reason and what to do, or null when it can
     */
    public static String unavailabilityCause() {
        return HostCheck.host().cause();
    }

    /**
     * Throws, with the reason and what to do, when this host cannot run the fast path.
     *
     * @throws SockmapUnavailableException when it cannot
     */
    public static void ensureAvailability() throws SockmapUnavailableException {
        HostCheck.Host h = HostCheck.host();
        if (h.cause() != null) {
            throw new SockmapUnavailableException("sockmap4j fast path unavailable: " + h.cause(), h.exception());
        }
    }
}
