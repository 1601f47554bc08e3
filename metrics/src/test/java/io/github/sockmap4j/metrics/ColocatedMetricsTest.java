package io.github.sockmap4j.metrics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.colocated.grpc.ColocatedGrpc;
import io.github.sockmap4j.colocated.grpc.Fallback;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.Test;

/**
 * The agreements' meters follow the process's counts, one per outcome, also after a collection
 * when nothing keeps the binder (no root).
 */
class ColocatedMetricsTest {
    /**
     * Runs the collector until it has cleared a weak reference: a meter whose state only a weak
     * reference held would stop following its count after this.
     */
    static void collectGarbage() {
        java.lang.ref.WeakReference<Object> canary = new java.lang.ref.WeakReference<>(new Object());
        long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(10);
        while (canary.get() != null) {
            assertTrue(System.nanoTime() < deadline, "a collection that clears weak references");
            System.gc();
        }
    }

    @Test
    void aMeterPerOutcomeFollowsTheCounts() {
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        new ColocatedMetrics().bindTo(registry);
        collectGarbage();
        assertEquals(Fallback.values().length + 1, registry.find("sockmap4j.colocated.agreements").functionCounters().size());
        double off = registry.get("sockmap4j.colocated.agreements").tag("outcome", "off").functionCounter().count();
        ColocatedGrpc.countOff("a channel in ColocatedMetricsTest");
        assertEquals(off + 1, registry.get("sockmap4j.colocated.agreements").tag("outcome", "off").functionCounter().count());
        assertEquals(ColocatedGrpc.upgrades(),
                registry.get("sockmap4j.colocated.agreements").tag("outcome", "upgraded").functionCounter().count());
    }

    /** What was lent is counted where it is lent (colocated-grpc's LendingTest); the meters read those counts. */
    @Test
    void theLendingMetersReadTheProcesssCounts() {
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        new ColocatedMetrics().bindTo(registry);
        collectGarbage();
        assertEquals(ColocatedGrpc.messagesLent(), registry.get("sockmap4j.colocated.lent.messages").functionCounter().count());
        assertEquals(ColocatedGrpc.bytesLent(), registry.get("sockmap4j.colocated.lent.bytes").functionCounter().count());
        assertEquals(ColocatedGrpc.lendingNoRoom(), registry.get("sockmap4j.colocated.lent.no_room").functionCounter().count());
    }
}
