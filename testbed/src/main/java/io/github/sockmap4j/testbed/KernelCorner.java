package io.github.sockmap4j.testbed;

import java.io.Closeable;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.Deque;

/**
 * A run's own corner of the kernel: a child cgroup this JVM moves into, and the name of a pin
 * directory under /sys/fs/bpf for what it opens there. {@link #close()} moves the JVM back and
 * removes the cgroup; what its owner registered with {@link #atExit} (a fast path to close, the
 * pins to remove) runs first, also from a shutdown hook if the JVM ends before {@link #close()}.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
public final class KernelCorner implements AutoCloseable {
    public final Path cgroup;
    public final Path pinDir;
    public final Path originalCgroup;
    private final Deque<Closeable> atExit = new ArrayDeque<>();
    private final Thread hook;
    private boolean closed;

    private KernelCorner(Path cgroup, Path pinDir, Path originalCgroup) {
        this.cgroup = cgroup;
        this.pinDir = pinDir;
        this.originalCgroup = originalCgroup;
        this.hook = new Thread(this::atJvmExit, "kernel-corner-cleanup");
        Runtime.getRuntime().addShutdownHook(hook);
    }

    /** Makes a cgroup named after {@code what}, moves this JVM into it, and names a pin directory. */
    public static KernelCorner enter(String what) throws IOException {
        Path original = Cgroup2.own();
        Path cg = Cgroup2.create(what);
        try {
            Cgroup2.moveSelf(cg);
        } catch (IOException | RuntimeException e) {
            Cgroup2.delete(cg);
            throw e;
        }
        return new KernelCorner(cg, Path.of("/sys/fs/bpf").resolve(Cgroup2.uniqueName(what)), original);
    }

    /** Runs {@code cleanup} before the corner goes (the last registered first), at close or at JVM exit. */
    public synchronized void atExit(Closeable cleanup) {
        atExit.push(cleanup);
    }

    /**
     * Closes {@code owner} (what opened the pins), then this corner, whatever happens; then fails
     * if the pin directory had outlived its owner: its last user removes it when no socket is
     * registered any more, so pins left mean a channel was left open.
     */
    public void closeAfter(Closeable owner) throws IOException {
        boolean left;
        try {
            owner.close();
        } finally {
            left = Files.exists(pinDir);
            close(); // whatever happened, the kernel is left clean
        }
        if (left) {
            throw new AssertionError("pins left behind in " + pinDir + " (sockets still registered: a channel was not closed)");
        }
    }

    /** Runs the registered clean-ups, moves this JVM back and removes the cgroup; once. */
    @Override
    public void close() throws IOException {
        try {
            leave();
        } finally {
            try {
                Runtime.getRuntime().removeShutdownHook(hook);
            } catch (IllegalStateException exiting) {
                // The JVM is exiting: the hook runs (and finds the corner gone).
            }
        }
    }

    private synchronized void leave() throws IOException {
        if (closed) {
            return;
        }
        closed = true;
        IOException first = null;
        while (!atExit.isEmpty()) {
            try {
                atExit.pop().close();
            } catch (IOException e) {
                first = first == null ? e : first;
            }
        }
        Cgroup2.moveSelf(originalCgroup);
        Cgroup2.delete(cgroup);
        if (first != null) {
            throw first;
        }
    }

    private void atJvmExit() {
        try {
            leave();
        } catch (IOException ignored) {
            // Best effort at exit.
        }
    }
}
