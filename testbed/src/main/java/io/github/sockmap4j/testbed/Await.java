package io.github.sockmap4j.testbed;

import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * Waits for a condition that no event announces (a map entry, a port opted in on an event loop,
 * a thread parked in a system call), checking it with a growing back-off: spin a few times,
 * then park from 50 µs up to 10 ms. The one polling loop the tests share; a timeout fails with
 * what was awaited.
 */
public final class Await {
    /**
     * How much longer every wait of the tests may take: {@code sockmap4j.test.waitScale}, 1 unless
     * set (the kernel matrix sets it for guests under emulation, which run code 10-20x slower).
     */
    public static final long SCALE = Math.max(1, Long.getLong("sockmap4j.test.waitScale", 1));

    /** What tests wait for unless they say otherwise. */
    public static final Duration DEFAULT = Duration.ofSeconds(10);

    /** {@code seconds} times {@link #SCALE}. */
    public static long scaled(long seconds) {
        return seconds * SCALE;
    }

    /** A condition that may throw while checked. */
    @FunctionalInterface
    public interface Condition {
        boolean holds() throws Exception;
    }

    private Await() {
    }

    /** Waits up to {@link #DEFAULT} for {@code condition}; fails naming {@code what} otherwise. */
    public static void until(String what, Condition condition) throws InterruptedException {
        until(what, DEFAULT, condition);
    }

    public static void until(String what, Duration timeout, Condition condition) throws InterruptedException {
        if (!holdsWithin(timeout, condition)) {
            throw new AssertionError("timed out after " + timeout.toMillis() * SCALE + " ms waiting until " + what);
        }
    }

    /**
     * Whether {@code condition} came to hold within {@code timeout} (for callers that assert more).
     * A checked exception from the condition fails the test with it as the cause.
     */
    public static boolean holdsWithin(Duration timeout, Condition condition) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos() * SCALE;
        long park = TimeUnit.MICROSECONDS.toNanos(50);
        for (int spins = 0; ; spins++) {
            if (check(condition)) {
                return true;
            }
            if (System.nanoTime() - deadline >= 0) {
                return false;
            }
            if (spins < 10) {
                Thread.onSpinWait();
            } else {
                LockSupport.parkNanos(park);
                park = Math.min(park * 2, TimeUnit.MILLISECONDS.toNanos(10));
            }
            if (Thread.interrupted()) {
                throw new InterruptedException("interrupted waiting");
            }
        }
    }

    private static boolean check(Condition condition) throws InterruptedException {
        try {
            return condition.holds();
        } catch (InterruptedException | RuntimeException e) {
            throw e;
        } catch (Exception e) {
            throw new AssertionError("checking a condition failed: " + e, e);
        }
    }

    /** Whether {@code t} is inside a method of {@code className} named {@code method} now. */
    public static boolean isIn(Thread t, String className, String method) {
        for (StackTraceElement e : t.getStackTrace()) {
            if (e.getClassName().equals(className) && e.getMethodName().equals(method)) {
                return true;
            }
        }
        return false;
    }
}
