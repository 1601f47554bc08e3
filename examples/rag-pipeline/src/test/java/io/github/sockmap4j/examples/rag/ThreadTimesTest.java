package io.github.sockmap4j.examples.rag;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The demo's reading of a process's threads: waits seen, and threads that end or begin in a phase. */
class ThreadTimesTest {
    private static final Path SELF = Path.of("/proc/self/task");

    private static List<Thread> spin(int n, AtomicBoolean stop, String name) {
        List<Thread> spinners = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            spinners.add(Thread.ofPlatform().name(name + i).start(() -> {
                while (!stop.get()) {
                    Thread.onSpinWait();
                }
            }));
        }
        return spinners;
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void threadsOutnumberingTheCpusWaitForOne() throws InterruptedException {
        ThreadTimes before = ThreadTimes.read(SELF);
        assertTrue(before.known(), "this kernel keeps schedstat");
        AtomicBoolean stop = new AtomicBoolean();
        List<Thread> spinners = spin(2 * Runtime.getRuntime().availableProcessors() + 1, stop, "spinner-");
        try {
            // Until the spinners' own waiting shows (a scheduler tick or two with more threads than CPUs).
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (ThreadTimes.read(SELF).since(before).applicationWaitNanos() <= 0 && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            assertTrue(ThreadTimes.read(SELF).since(before).applicationWaitNanos() > 0,
                    "threads outnumbering the CPUs waited for one");
        } finally {
            stop.set(true);
            for (Thread t : spinners) {
                t.join();
            }
        }
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aThreadThatEndsInThePhaseTakesNothingOutOfTheOthers() throws InterruptedException {
        // A thread that ran before the phase and ends in it: a sum over the live threads would
        // lose its whole CPU time; thread by thread it loses nothing the others used.
        AtomicBoolean stopOld = new AtomicBoolean();
        List<Thread> old = spin(1, stopOld, "grpc-default-executor-");
        ThreadTimes before;
        try {
            CountDownLatch ran = new CountDownLatch(1);
            Thread.ofPlatform().start(() -> {
                long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(200);
                while (System.nanoTime() < end) {
                    Thread.onSpinWait();
                }
                ran.countDown();
            });
            ran.await();
            before = ThreadTimes.read(SELF);
        } finally {
            stopOld.set(true);
            old.get(0).join();
        }
        AtomicBoolean stopNew = new AtomicBoolean();
        List<Thread> fresh = spin(1, stopNew, "grpc-default-executor-");
        ThreadTimes used;
        try {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (ThreadTimes.read(SELF).since(before).cpuByKind().getOrDefault(ThreadKind.HANDLERS, 0L) < 50_000_000L
                    && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            used = ThreadTimes.read(SELF).since(before); // the new thread still running: an ended one counts nothing
        } finally {
            stopNew.set(true);
            fresh.get(0).join();
        }
        assertTrue(used.cpuByKind().getOrDefault(ThreadKind.HANDLERS, 0L) >= 50_000_000L,
                "the new thread's CPU counts whole: " + used.threads() + " since " + before.threads());
        assertTrue(used.threads().values().stream().allMatch(s -> s.cpuNanos() >= 0 && s.waitNanos() >= 0),
                "no thread counts less than nothing");
    }

    @Test
    void theJvmsOwnThreadsWaitForNoRequest() {
        ThreadTimes t = new ThreadTimes(Map.of(
                1L, new ThreadTimes.Sample("C2 CompilerThre", 1, 10, 1_000),
                2L, new ThreadTimes.Sample("VM Thread", 1, 10, 2_000),
                3L, new ThreadTimes.Sample("GC Thread#0", 1, 10, 4_000),
                4L, new ThreadTimes.Sample("grpc-default-ex", 1, 10, 8),
                5L, new ThreadTimes.Sample("rag-io-1-1", 1, 10, 16)), true);
        assertEquals(24, t.applicationWaitNanos());
    }

    @Test
    void aThreadIdGivenAgainIsANewThread() {
        ThreadTimes before = new ThreadTimes(Map.of(7L, new ThreadTimes.Sample("grpc-default-ex", 100, 900, 50)), true);
        ThreadTimes after = new ThreadTimes(Map.of(7L, new ThreadTimes.Sample("grpc-default-ex", 250, 300, 20)), true);
        assertEquals(new ThreadTimes.Sample("grpc-default-ex", 250, 300, 20), after.since(before).threads().get(7L));
        ThreadTimes later = new ThreadTimes(Map.of(7L, new ThreadTimes.Sample("grpc-default-ex", 100, 1_000, 70)), true);
        assertEquals(new ThreadTimes.Sample("grpc-default-ex", 100, 100, 20), later.since(before).threads().get(7L));
    }

    @Test
    void slicesAddUpThreadByThread() {
        // Two measured slices of one path: the same thread's use adds up, a thread id the kernel
        // gave again to a new thread stays a thread of its own, and an unknown slice makes the whole unknown.
        ThreadTimes first = new ThreadTimes(Map.of(
                7L, new ThreadTimes.Sample("rag-io-1-1", 100, 900, 50),
                8L, new ThreadTimes.Sample("grpc-default-ex", 100, 400, 10)), true);
        ThreadTimes second = new ThreadTimes(Map.of(
                7L, new ThreadTimes.Sample("rag-io-1-1", 100, 300, 20),
                8L, new ThreadTimes.Sample("grpc-default-ex", 260, 70, 5)), true);
        ThreadTimes both = first.plus(second);
        assertEquals(3, both.threads().size(), "the reused id 8 is two threads: " + both.threads());
        assertEquals(new ThreadTimes.Sample("rag-io-1-1", 100, 1_200, 70), both.threads().get(7L));
        assertEquals(1_200L, both.cpuByKind().get(ThreadKind.EVENT_LOOPS));
        assertEquals(470L, both.cpuByKind().get(ThreadKind.HANDLERS));
        assertEquals(85, both.applicationWaitNanos());
        assertEquals(both.threads(), both.plus(new ThreadTimes(Map.of(), true)).threads(), "an empty slice adds nothing");
        assertFalse(first.plus(ThreadTimes.UNKNOWN).known());
        assertFalse(ThreadTimes.UNKNOWN.plus(first).known());
    }

    @Test
    void noSuchProcessReadsAsUnknown() {
        ThreadTimes gone = ThreadTimes.read(Path.of("/proc/no-such-process/task"));
        assertFalse(gone.known());
        assertEquals(-1, gone.applicationWaitNanos());
        assertFalse(ThreadTimes.read(SELF).since(gone).known(), "a phase with an unknown end is unknown");
    }

    @Test
    void voluntarySwitchesAreReadFromAStatusFile() {
        String status = "Name:\tgrpc-default-ex\nState:\tS (sleeping)\nvoluntary_ctxt_switches:\t1234\n"
                + "nonvoluntary_ctxt_switches:\t56\n";
        org.junit.jupiter.api.Assertions.assertEquals(1234, ThreadTimes.voluntarySwitches(status));
        org.junit.jupiter.api.Assertions.assertEquals(0, ThreadTimes.voluntarySwitches("Name:\tx\n"));
    }

    /** A thread asleep in the kernel before each of 20 hand-offs shows at least 20 more sleeps. */
    @Test
    void aThreadThatBlocksIsCountedAsItSleeps() throws Exception {
        java.util.concurrent.SynchronousQueue<Integer> q = new java.util.concurrent.SynchronousQueue<>();
        Thread taker = new Thread(() -> {
            try {
                for (int i = 0; i < 22; i++) {
                    q.take();
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "sleepy-taker");
        taker.start();
        q.put(0); // the taker is in its loop
        java.nio.file.Path stat = null;
        try (var tasks = java.nio.file.Files.list(java.nio.file.Path.of("/proc/self/task"))) {
            for (java.nio.file.Path t : tasks.toList()) {
                if (java.nio.file.Files.readString(t.resolve("comm")).trim().equals("sleepy-taker")) {
                    stat = t.resolve("stat");
                }
            }
        }
        org.junit.jupiter.api.Assertions.assertNotNull(stat, "the taker's /proc entry");
        untilAsleep(stat);
        ThreadTimes before = ThreadTimes.read(java.nio.file.Path.of("/proc/self/task"));
        for (int i = 1; i <= 20; i++) {
            q.put(i); // wakes the taker, which takes it and goes back to sleep
            untilAsleep(stat);
        }
        ThreadTimes after = ThreadTimes.read(java.nio.file.Path.of("/proc/self/task"));
        q.put(21); // the last: the taker was alive for the reading, and now ends
        taker.join();
        long sleeps = after.since(before).threads().values().stream()
                .filter(x -> x.name().equals("sleepy-taker")).mapToLong(ThreadTimes.Sample::sleeps).sum();
        org.junit.jupiter.api.Assertions.assertTrue(sleeps >= 20, "the taker slept " + sleeps + " times");
    }

    /** Until the kernel has the thread of {@code stat} asleep (state S). */
    private static void untilAsleep(java.nio.file.Path stat) throws java.io.IOException {
        while (!java.nio.file.Files.readString(stat).replaceFirst("^.*\\) ", "").startsWith("S")) {
            Thread.onSpinWait();
        }
    }
}
