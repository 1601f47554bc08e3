package io.github.sockmap4j.netty;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.api.Test;

/**
 * The polling executor without gRPC: every task runs once whoever hands it over, tasks that wait
 * for each other all get threads (as a cached pool gives them), idle threads end, one CPU polls not.
 */
class PollingExecutorTest {
    private static final Duration KEEP_ALIVE = Duration.ofMillis(200);

    /**
     * Polling (2 CPUs, 50 µs), not polling on one CPU, and with no window; polling whatever the
     * CPUs' pressure (PollingBacksOffTest tries the gate).
     */
    private static PollingExecutor executor(int cpus, long maxPollMicros) {
        return new PollingExecutor("test-exec", Duration.ofNanos(maxPollMicros * 1000), KEEP_ALIVE, cpus, CpuRoom.ALWAYS);
    }

    @ParameterizedTest(name = "{0} CPUs, polling up to {1} us")
    @CsvSource({"2, 50", "4, 1000", "1, 50", "2, 0"})
    void everyTaskRunsExactlyOnceFromManySubmitters(int cpus, long maxPollMicros) throws Exception {
        PollingExecutor e = executor(cpus, maxPollMicros);
        int submitters = 4;
        int each = 25_000;
        AtomicIntegerArray runs = new AtomicIntegerArray(submitters * each);
        CountDownLatch done = new CountDownLatch(submitters * each);
        List<Thread> threads = new ArrayList<>();
        for (int s = 0; s < submitters; s++) {
            int base = s * each;
            Thread t = new Thread(() -> {
                for (int i = 0; i < each; i++) {
                    int slot = base + i;
                    e.execute(() -> {
                        runs.incrementAndGet(slot);
                        done.countDown();
                    });
                }
            });
            t.start();
            threads.add(t);
        }
        for (Thread t : threads) {
            t.join();
        }
        assertTrue(done.await(60, TimeUnit.SECONDS), done.getCount() + " tasks never ran");
        for (int i = 0; i < runs.length(); i++) {
            assertEquals(1, runs.get(i), "task " + i);
        }
        awaitNoThreads(e);
    }

    @ParameterizedTest(name = "{0} CPUs, polling up to {1} us")
    @CsvSource({"2, 50", "2, 1000", "1, 50"})
    void tasksThatWaitForEachOtherAllGetAThread(int cpus, long maxPollMicros) throws Exception {
        PollingExecutor e = executor(cpus, maxPollMicros);
        for (int round = 0; round < 200; round++) {
            int n = 2 + round % 15;
            CountDownLatch all = new CountDownLatch(n);
            CountDownLatch finished = new CountDownLatch(n);
            for (int i = 0; i < n; i++) {
                e.execute(() -> {
                    all.countDown();
                    try {
                        if (all.await(30, TimeUnit.SECONDS)) {
                            finished.countDown();
                        }
                    } catch (InterruptedException ie) {
                        Thread.currentThread().interrupt();
                    }
                });
            }
            assertTrue(finished.await(30, TimeUnit.SECONDS), "round " + round + ": " + all.getCount() + " of " + n
                    + " tasks never started while the others waited for them (threads: " + e.threads() + ")");
        }
        awaitNoThreads(e);
    }

    @Test
    void aTaskThatThrowsStopsNoOtherTask() throws Exception {
        PollingExecutor e = executor(2, 50);
        AtomicReference<Throwable> reported = new AtomicReference<>();
        Thread.UncaughtExceptionHandler before = Thread.getDefaultUncaughtExceptionHandler();
        Thread.setDefaultUncaughtExceptionHandler((t, x) -> reported.set(x));
        try {
            CountDownLatch after = new CountDownLatch(100);
            for (int i = 0; i < 100; i++) {
                e.execute(() -> {
                    throw new IllegalStateException("thrown by a task");
                });
                e.execute(after::countDown);
            }
            assertTrue(after.await(30, TimeUnit.SECONDS), after.getCount() + " tasks after a throwing one never ran");
            assertEquals("thrown by a task", reported.get().getMessage(), "the thread's handler is told");
            awaitNoThreads(e);
        } finally {
            Thread.setDefaultUncaughtExceptionHandler(before);
        }
    }

    @Test
    void tasksHandedOverOneAfterAnotherAreFoundByPollingAndNotOnOneCpu() throws Exception {
        // One task at a time, the next handed over as soon as the last ran: a thread polling for up to 1 ms
        // finds most of them; on one CPU the same executor never polls.
        PollingExecutor polling = executor(2, 1000);
        PollingExecutor oneCpu = executor(1, 1000);
        pingPong(polling, 5_000);
        pingPong(oneCpu, 5_000);
        assertTrue(polling.pollHits() > 0, "no task found while polling: " + polling.sleeps() + " sleeps");
        assertEquals(0, oneCpu.pollHits(), "a thread polled on one CPU");
        awaitNoThreads(polling);
        awaitNoThreads(oneCpu);
    }

    @Test
    void badArgumentsAreRefused() {
        assertThrows(IllegalArgumentException.class, () -> new PollingExecutor("x", Duration.ofNanos(-1)));
        assertThrows(IllegalArgumentException.class, () -> new PollingExecutor("x", Duration.ofMillis(2)));
        assertThrows(IllegalArgumentException.class, () -> new PollingExecutor("x", Duration.ZERO, Duration.ZERO, 2));
        assertThrows(NullPointerException.class, () -> new PollingExecutor(null, Duration.ZERO));
        assertThrows(NullPointerException.class, () -> executor(2, 50).execute(null));
    }

    private static void pingPong(PollingExecutor e, int tasks) throws InterruptedException {
        for (int i = 0; i < tasks; i++) {
            CountDownLatch ran = new CountDownLatch(1);
            e.execute(ran::countDown);
            assertTrue(ran.await(30, TimeUnit.SECONDS), "task " + i + " never ran");
        }
    }

    /** Idle threads end after the keep-alive: nothing of a test's executor is left running. */
    private static void awaitNoThreads(PollingExecutor e) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (e.threads() > 0) {
            assertTrue(System.nanoTime() - deadline < 0, e + " still has threads 30 s after its last task");
            Thread.sleep(10);
        }
    }
}
