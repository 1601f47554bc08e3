package io.github.sockmap4j.examples.rag;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The demo's run-queue reading: threads that outnumber the CPUs wait, and the reading sees it. */
class StageRunQueueTest {
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void threadsOutnumberingTheCpusWaitForOne() throws InterruptedException {
        Path self = Path.of("/proc/self/task");
        long before = Stage.runQueueNanos(self);
        assertTrue(before >= 0, "this kernel keeps schedstat");
        int n = 2 * Runtime.getRuntime().availableProcessors() + 1;
        AtomicBoolean stop = new AtomicBoolean();
        List<Thread> spinners = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            spinners.add(Thread.ofPlatform().start(() -> {
                while (!stop.get()) {
                    Thread.onSpinWait();
                }
            }));
        }
        try {
            // Until the spinners' own waiting shows (a scheduler tick or two with more threads than CPUs).
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (Stage.runQueueNanos(self) <= before && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            assertTrue(Stage.runQueueNanos(self) > before, "threads outnumbering the CPUs waited for one");
        } finally {
            stop.set(true);
            for (Thread t : spinners) {
                t.join();
            }
        }
    }

    @Test
    void theJvmsOwnThreadsAreLeftOut() {
        for (String jvm : List.of("C2 CompilerThre", "C1 CompilerThre", "GC Thread#0", "G1 Conc#0", "VM Thread",
                "VM Periodic Tas")) {
            assertTrue(Stage.JVM_THREAD.matcher(jvm).lookingAt(), jvm);
        }
        for (String own : List.of("main", "grpc-default-ex", "sockmap4j-watch", "rag-io-1-1", "Thread-3")) {
            assertTrue(!Stage.JVM_THREAD.matcher(own).lookingAt(), own);
        }
    }

    @Test
    void noSuchProcessReadsAsUnknown() {
        assertEquals(-1, Stage.runQueueNanos(Path.of("/proc/no-such-process/task")));
    }
}
