package io.github.sockmap4j.linux.sys;

import io.github.sockmap4j.linux.ffi.LibC;
import io.github.sockmap4j.linux.ffi.Linux;
import io.github.sockmap4j.linux.ffi.NativeIOException;
import io.github.sockmap4j.linux.ffi.SysCalls;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The cookie of a network namespace (SO_NETNS_COOKIE, Linux 5.14+): what the programs compare with
 * {@code bpf_get_netns_cookie}. A namespace is entered only on a short-lived thread of its own
 * ({@code setns} moves just that thread), which ends there.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
public final class NetnsCookie {
    private NetnsCookie() {
    }

    /** The cookie of the namespace the calling thread is in. */
    public static long here() throws NativeIOException {
        int fd = LibC.socket(Linux.AF_INET, Linux.SOCK_STREAM | Linux.SOCK_CLOEXEC, 0);
        try {
            return LibC.getsockoptLong(fd, Linux.SOL_SOCKET, Linux.SO_NETNS_COOKIE);
        } finally {
            LibC.close(fd);
        }
    }

    /**
     * The cookie of the namespace process {@code pid} is in (entering it needs CAP_SYS_ADMIN,
     * unless it is this thread's own).
     *
     * @throws IOException naming the pid when it is gone or its namespace cannot be entered
     */
    public static long ofProcess(long pid) throws IOException {
        Path ns = Path.of("/proc", Long.toString(pid), "ns", "net");
        try {
            if (Files.readSymbolicLink(ns).equals(Files.readSymbolicLink(Path.of("/proc/thread-self/ns/net")))) {
                return here();
            }
        } catch (IOException e) {
            throw new IOException("no network namespace of pid " + pid + " (" + e.getMessage() + "): has it exited?", e);
        }
        try {
            return inNamespaceOf(pid, NetnsCookie::here);
        } catch (IOException e) {
            throw new IOException("cannot enter the network namespace of pid " + pid + ": " + e.getMessage(), e);
        }
    }

    /** Work that may fail with an IOException. */
    @FunctionalInterface
    public interface IoSupplier<T> {
        T get() throws IOException;
    }

    /**
     * What {@code what} returns, run on a short-lived thread that first enters the network
     * namespace of {@code pid} (setns on /proc/PID/ns/net moves only that thread) and then ends:
     * no thread of the caller's is left in another namespace. Sockets made there stay of it.
     */
    public static <T> T inNamespaceOf(long pid, IoSupplier<T> what) throws IOException {
        int nsFd = SysCalls.open("/proc/" + pid + "/ns/net", Linux.O_RDONLY | Linux.O_CLOEXEC, 0);
        try {
            return inNamespace(nsFd, "pid " + pid, what);
        } finally {
            LibC.close(nsFd);
        }
    }

    /**
     * As {@link #inNamespaceOf}, in the namespace descriptor {@code nsFd} holds (the caller's, who
     * closes it; {@code name} says whose it is in messages).
     */
    public static <T> T inNamespace(int nsFd, String name, IoSupplier<T> what) throws IOException {
        List<T> result = new ArrayList<>(1);
        IOException[] failed = new IOException[1];
        Thread t = new Thread(() -> {
            try {
                SysCalls.setns(nsFd, Linux.CLONE_NEWNET);
                result.add(what.get());
            } catch (IOException e) {
                failed[0] = e;
            }
        }, "sockmap4j-netns");
        t.setDaemon(true);
        t.start();
        try {
            t.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted entering the network namespace of " + name, e);
        }
        if (failed[0] != null) {
            throw failed[0];
        }
        return result.get(0);
    }
}
