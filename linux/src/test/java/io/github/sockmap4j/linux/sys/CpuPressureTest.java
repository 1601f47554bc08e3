package io.github.sockmap4j.linux.sys;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;

/** The kernel's CPU pressure as the polling gate reads it: the files' formats, and a real load seen. */
class CpuPressureTest {
    @Test
    void theSomeLinesTotalIsReadWhicheverLineComesFirst() {
        String psi = "some avg10=1.50 avg60=6.46 avg300=8.18 total=2679054492\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=7\n";
        assertEquals(2679054492L, CpuPressure.someTotal(psi));
        assertEquals(12L, CpuPressure.someTotal("full avg10=0.00 avg60=0.00 avg300=0.00 total=99\nsome avg10=0 avg60=0 avg300=0 total=12"));
    }

    @Test
    void aFileThatIsNotPressureIsRefusedWithWhatItSaid() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> CpuPressure.someTotal("full avg10=0.00 total=3\n"));
        assertTrue(e.getMessage().contains("full avg10"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> CpuPressure.someTotal("some avg10=0.00\n"));
        assertThrows(IllegalArgumentException.class, () -> CpuPressure.runnable("0.10 0.20"));
    }

    @Test
    void loadavgsRunnableFieldCountsTasks() {
        assertEquals(3, CpuPressure.runnable("0.52 0.58 0.59 3/467 12345\n"));
    }

    /**
     * Twice as many busy threads as CPUs leave tasks waiting all the time: the total read here
     * grows by a good part of the wall time (whichever source this machine has), and never runs back.
     */
    @Test
    void busyThreadsBeyondTheCpusShowAsWaiting() throws Exception {
        try (CpuPressure p = CpuPressure.open()) {
            System.out.println("CPU pressure from " + p.source() + " (" + p.file() + ")");
            long before = p.stalledMicros();
            AtomicBoolean stop = new AtomicBoolean();
            List<Thread> busy = new ArrayList<>();
            for (int i = 0; i < 2 * Runtime.getRuntime().availableProcessors() + 1; i++) {
                Thread t = new Thread(() -> {
                    while (!stop.get()) {
                        Thread.onSpinWait();
                    }
                }, "busy-" + i);
                t.setDaemon(true);
                t.start();
                busy.add(t);
            }
            long t0 = System.nanoTime();
            long last = before;
            try {
                // Until a tenth of a second's wait is counted, read every 10 ms (at most 20 s).
                while (last - before < 100_000 && System.nanoTime() - t0 < TimeUnit.SECONDS.toNanos(20)) {
                    Thread.sleep(10);
                    long now = p.stalledMicros();
                    assertTrue(now >= last, "the total ran back: " + last + " -> " + now);
                    last = now;
                }
            } finally {
                stop.set(true);
                for (Thread t : busy) {
                    t.join();
                }
            }
            long waited = last - before;
            long wall = (System.nanoTime() - t0) / 1000;
            assertTrue(waited >= 100_000, p.source() + ": " + waited + " µs waited in " + wall + " µs of busy threads");
        }
    }
}
