package io.github.sockmap4j.netty;

import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;

/**
 * An executor whose idle threads poll for the next task for a short while before they sleep, for
 * gRPC's handlers: a task handed over within the window wakes no thread (no futex by the one that
 * hands it over, no idle CPU woken). gRPC's own executor hands every step of a call (its start,
 * its message, its half-close, its end) to a sleeping thread of a cached pool; measured on the
 * fast path with polling event loops, those were 5.7 sleeps of executor threads per unary call.
 *
 * <p>Threads as a cached pool makes them: a task that finds no idle thread gets a new one, so a
 * handler may block as gRPC's executor allows; a thread idle for the keep-alive ends. At most
 * half the CPUs' idle threads poll at once (at least one), each for the window its
 * {@link PollWindow} has learnt, yielding the CPU between two looks: a poll that finds a task
 * doubles the window (up to the most), one that ends in a sleep longer than the most halves it,
 * and a task that came sooner after the sleep began than the window would have been opens it
 * again (counted to when the task woke the thread, not to when the thread ran). Steps of calls that come
 * within the window keep it open although each call's first step comes later; with no tasks the
 * window closes after a few sleeps. On one CPU none polls, and the executor is a cached pool;
 * while tasks wait for the CPUs ({@link CpuRoom}), none polls either.
 *
 * <p>Tasks are run in no particular order (gRPC serializes each call's own steps itself).
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
public final class PollingExecutor implements Executor {
    private final ConcurrentLinkedQueue<Runnable> tasks = new ConcurrentLinkedQueue<>();
    /** Sleeping threads, the latest first; a thread taken from here is being woken for a task. */
    private final ConcurrentLinkedDeque<Worker> sleeping = new ConcurrentLinkedDeque<>();
    /**
     * Tasks handed over and not yet taken, counted after the hand-over, and threads polling: a
     * task that finds more tasks waiting than threads polling wakes or starts a thread. A polling
     * thread leaves the count before it counts its task taken, so a task handed over meanwhile
     * never counts on it.
     */
    private final AtomicInteger waiting = new AtomicInteger();
    private final AtomicInteger polling = new AtomicInteger();
    private final AtomicInteger threads = new AtomicInteger();
    private final AtomicInteger started = new AtomicInteger();
    private final LongAdder pollHits = new LongAdder();
    private final LongAdder sleeps = new LongAdder();
    private final LongAdder busySkips = new LongAdder();
    private final CpuRoom room;
    private final String name;
    private final long maxPollNanos;
    private final long keepAliveNanos;
    private final int maxPolling;

    /**
     * Threads named {@code name-N} that poll for up to {@code maxPoll} and end after a minute idle.
     *
     * @param maxPoll the longest poll, zero for none (then a cached pool), at most 1 ms
     */
    public PollingExecutor(String name, Duration maxPoll) {
        this(name, maxPoll, Duration.ofSeconds(60), Runtime.getRuntime().availableProcessors());
    }

    PollingExecutor(String name, Duration maxPoll, Duration keepAlive, int cpus) {
        this(name, maxPoll, keepAlive, cpus, CpuRoom.shared());
    }

    PollingExecutor(String name, Duration maxPoll, Duration keepAlive, int cpus, CpuRoom room) {
        this.room = Objects.requireNonNull(room, "room");
        this.name = Objects.requireNonNull(name, "name");
        Objects.requireNonNull(maxPoll, "maxPoll");
        if (maxPoll.isNegative() || maxPoll.compareTo(SockmapNetty.MAX_POLL) > 0) {
            throw new IllegalArgumentException("maxPoll must be between 0 and " + SockmapNetty.MAX_POLL.toNanos() / 1000
                    + " µs (a sleep is cheaper beyond): " + maxPoll);
        }
        if (keepAlive.isNegative() || keepAlive.isZero()) {
            throw new IllegalArgumentException("keepAlive must be positive: " + keepAlive);
        }
        this.maxPollNanos = maxPoll.toNanos();
        this.keepAliveNanos = keepAlive.toNanos();
        this.maxPolling = cpus < 2 || maxPollNanos == 0 ? 0 : Math.max(1, cpus / 2);
    }

    @Override
    public void execute(Runnable task) {
        tasks.offer(Objects.requireNonNull(task, "task"));
        if (waiting.incrementAndGet() > polling.get()) {
            wake();
        }
    }

    /** Wakes a sleeping thread for a task, or starts one. */
    private void wake() {
        Worker w = sleeping.pollFirst();
        if (w != null) {
            w.wokenAt = System.nanoTime();
            LockSupport.unpark(w.thread);
            return;
        }
        threads.incrementAndGet();
        Worker fresh = new Worker();
        Thread t = new Thread(fresh::run, name + "-" + started.incrementAndGet());
        t.setDaemon(true);
        fresh.thread = t;
        try {
            t.start();
        } catch (Throwable e) {
            threads.decrementAndGet();
            throw e;
        }
    }

    /** Whether idle threads poll at all (not with no window, not on one CPU). */
    boolean polls() {
        return maxPolling > 0;
    }

    /** Threads alive now, polling, sleeping or running a task. */
    public int threads() {
        return threads.get();
    }

    /** How often an idle thread found its next task while polling (a wake-up saved). */
    public long pollHits() {
        return pollHits.sum();
    }

    /** How often an idle thread went to sleep. */
    public long sleeps() {
        return sleeps.sum();
    }

    /** How often an idle thread slept without polling because tasks were waiting for the CPUs. */
    public long skippedForBusyCpus() {
        return busySkips.sum();
    }

    @Override
    public String toString() {
        return "PollingExecutor[" + name + ", polls up to " + maxPollNanos / 1000 + " µs, " + threads() + " threads]";
    }

    private final class Worker {
        Thread thread;
        /**
         * When a task woke this thread: the window learns from when work came, not from when the
         * thread ran again (on these VMs a sleeping thread takes tens of microseconds to run, which
         * would keep the window shut however soon tasks come).
         */
        volatile long wokenAt;
        private final PollWindow window = new PollWindow(maxPollNanos, Math.min(5_000, Math.max(1, maxPollNanos)));

        void run() {
            try {
                Runnable task;
                while ((task = next()) != null) {
                    try {
                        task.run();
                    } catch (Throwable t) {
                        thread.getUncaughtExceptionHandler().uncaughtException(thread, t);
                    }
                }
            } finally {
                threads.decrementAndGet();
            }
        }

        /** The next task, or null when none came for the keep-alive. */
        private Runnable next() {
            Runnable task = tasks.poll();
            if (task != null) {
                waiting.decrementAndGet();
                return task;
            }
            long begin = System.nanoTime();
            long pollFor = window.nanos();
            if (pollFor > 0 && !room.hasRoom()) {
                busySkips.increment();
                pollFor = 0;
            }
            if (pollFor > 0 && claimPoll()) {
                long end = begin + pollFor;
                do {
                    Thread.yield();
                    task = tasks.poll();
                } while (task == null && System.nanoTime() - end < 0);
                polling.decrementAndGet();
                if (task != null) {
                    waiting.decrementAndGet();
                    window.found();
                    pollHits.increment();
                    return task;
                }
            }
            long deadline = begin + keepAliveNanos;
            while (true) {
                wokenAt = 0;
                sleeping.addFirst(this);
                task = tasks.poll(); // a task handed over before this thread was seen sleeping
                boolean woken = false;
                if (task == null) {
                    sleeps.increment();
                    LockSupport.parkNanos(this, deadline - System.nanoTime());
                    woken = !sleeping.removeFirstOccurrence(this);
                    task = tasks.poll();
                } else if (!sleeping.removeFirstOccurrence(this)) {
                    wake(); // woken for a task it did not take first: another thread takes that one
                }
                if (task != null) {
                    waiting.decrementAndGet();
                    long came = wokenAt;
                    window.blocked((came != 0 ? came : System.nanoTime()) - begin);
                    return task;
                }
                if (!woken && System.nanoTime() - deadline >= 0) {
                    return null;
                }
            }
        }

        private boolean claimPoll() {
            int n;
            do {
                n = polling.get();
                if (n >= maxPolling) {
                    return false;
                }
            } while (!polling.compareAndSet(n, n + 1));
            return true;
        }
    }
}
