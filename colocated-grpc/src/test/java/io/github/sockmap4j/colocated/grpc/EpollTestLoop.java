package io.github.sockmap4j.colocated.grpc;

import io.github.sockmap4j.linux.ffi.Epoll;
import io.github.sockmap4j.linux.ffi.EpollEvent;
import io.github.sockmap4j.linux.ffi.LibC;
import io.github.sockmap4j.linux.ffi.Linux;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.DelayQueue;
import java.util.concurrent.Delayed;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;

/**
 * An event loop of the kernel's epoll for the tests of this module, which has no Netty: one thread
 * waiting on an epoll set with its own eventfd for tasks, as Netty's epoll loop does, so that the
 * transport's reads on a loop are tried against the real kernel here too.
 */
final class EpollTestLoop implements ReadLoop, AutoCloseable {
    private final int epoll;
    private final int wakeup;
    private final Thread thread;
    private final ConcurrentLinkedQueue<Runnable> tasks = new ConcurrentLinkedQueue<>();
    private final DelayQueue<Timed> timed = new DelayQueue<>();
    private final ConcurrentHashMap<Integer, Runnable[]> watched = new ConcurrentHashMap<>();
    private volatile boolean ended;

    private record Timed(Runnable task, long at) implements Delayed {
        @Override
        public long getDelay(TimeUnit unit) {
            return unit.convert(at - System.nanoTime(), TimeUnit.NANOSECONDS);
        }

        @Override
        public int compareTo(Delayed o) {
            return Long.compare(at, ((Timed) o).at);
        }
    }

    EpollTestLoop(String name) throws java.io.IOException {
        epoll = Epoll.epollCreate();
        wakeup = Epoll.eventfd();
        check(Epoll.tryEpollCtl(epoll, Linux.EPOLL_CTL_ADD, wakeup, Linux.EPOLLIN | Linux.EPOLLET));
        thread = Thread.ofPlatform().daemon().name(name).start(this::run);
    }

    private static void check(int r) {
        if (r < 0) {
            throw new IllegalStateException("epoll_ctl: " + r);
        }
    }

    /** A loop named {@code name}, started. */
    static EpollTestLoop open(String name) {
        try {
            return new EpollTestLoop(name);
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    private void run() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment events = a.allocate(EpollEvent.SIZE * 16, 8);
            while (!ended) {
                Timed next = timed.peek();
                long delay = next == null ? TimeUnit.SECONDS.toNanos(1) : next.getDelay(TimeUnit.NANOSECONDS);
                int timeout = (int) Math.min(1000, (Math.max(0, delay) + 999_999) / 1_000_000);
                int n = tasks.isEmpty() && delay > 0 ? Epoll.tryEpollWait(epoll, events, timeout) : 0;
                for (int i = 0; i < n; i++) {
                    Runnable[] w = watched.get(EpollEvent.fd(events, i));
                    if (w != null) {
                        w[0].run();
                    }
                }
                Timed t;
                while ((t = timed.poll()) != null) {
                    t.task().run();
                }
                Runnable r;
                while ((r = tasks.poll()) != null) {
                    r.run();
                }
            }
        } finally {
            watched.values().forEach(w -> w[1].run());
            watched.clear();
        }
    }

    @Override
    public boolean inLoop() {
        return Thread.currentThread() == thread;
    }

    @Override
    public void execute(Runnable task) {
        if (ended) {
            throw new RejectedExecutionException("the loop ended");
        }
        tasks.add(task);
        Epoll.signal(wakeup);
    }

    @Override
    public void schedule(Runnable task, long delayNanos) {
        timed.add(new Timed(task, System.nanoTime() + delayNanos));
        Epoll.signal(wakeup);
    }

    @Override
    public CompletionStage<Watch> watch(int fd, Runnable readable, Runnable gone) {
        CompletableFuture<Watch> f = new CompletableFuture<>();
        execute(() -> {
            int r = Epoll.tryEpollCtl(epoll, Linux.EPOLL_CTL_ADD, fd, Linux.EPOLLIN | Linux.EPOLLET);
            if (r < 0) {
                f.completeExceptionally(new IllegalStateException("epoll_ctl ADD " + fd + ": " + r));
                return;
            }
            watched.put(fd, new Runnable[] {readable, gone});
            f.complete(() -> {
                watched.remove(fd);
                Epoll.tryEpollCtl(epoll, Linux.EPOLL_CTL_DEL, fd, 0);
                return CompletableFuture.completedFuture(null);
            });
        });
        return f;
    }

    /** How many descriptors the loop watches now. */
    int watching() {
        return watched.size();
    }

    /**
     * How many descriptors the loop watches once none is, or after 10 s: a connection's end takes
     * its bell out as it closes, which may be just after its transport said it terminated.
     */
    static int watchingOnceNone(EpollTestLoop... loops) {
        long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(10);
        while (true) {
            int n = 0;
            for (EpollTestLoop l : loops) {
                n += l.watching();
            }
            if (n == 0 || System.nanoTime() > deadline) {
                return n;
            }
            Thread.onSpinWait();
        }
    }

    String threadName() {
        return thread.getName();
    }

    @Override
    public void close() {
        ended = true;
        Epoll.signal(wakeup);
        try {
            thread.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return;
        }
        LibC.close(wakeup);
        LibC.close(epoll);
    }
}
