package io.github.sockmap4j.agent.control;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * The requests a uid may send: a token bucket each, {@code perSecond} tokens a second up to
 * {@code burst}. Root is not limited.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
final class RequestRate {
    private final int perSecond;
    private final int burst;
    /** Tokens and the time they were counted, by uid. */
    private final Map<Integer, long[]> buckets = new ConcurrentHashMap<>();

    RequestRate(int perSecond, int burst) {
        this.perSecond = perSecond;
        this.burst = burst;
    }

    /** Takes a token from {@code uid}'s bucket; false when it is empty. */
    boolean take(int uid) {
        if (uid == 0) {
            return true;
        }
        long now = System.nanoTime();
        long[] b = buckets.computeIfAbsent(uid, k -> new long[] {burst, now});
        synchronized (b) {
            long refill = (now - b[1]) * perSecond / TimeUnit.SECONDS.toNanos(1);
            if (refill > 0) {
                b[0] = Math.min(burst, b[0] + refill);
                b[1] = now;
            }
            if (b[0] == 0) {
                return false;
            }
            b[0]--;
            return true;
        }
    }
}
