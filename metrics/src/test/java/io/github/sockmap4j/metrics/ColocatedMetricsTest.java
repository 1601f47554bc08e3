package io.github.sockmap4j.metrics;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.sockmap4j.colocated.grpc.ColocatedGrpc;
import io.github.sockmap4j.colocated.grpc.Fallback;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.Test;

/** The agreements' meters follow the process's counts, one per outcome (no root). */
class ColocatedMetricsTest {
    @Test
    void aMeterPerOutcomeFollowsTheCounts() {
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        new ColocatedMetrics().bindTo(registry);
        assertEquals(Fallback.values().length + 1, registry.find("sockmap4j.colocated.agreements").functionCounters().size());
        double off = registry.get("sockmap4j.colocated.agreements").tag("outcome", "off").functionCounter().count();
        ColocatedGrpc.countOff("a channel in ColocatedMetricsTest");
        assertEquals(off + 1, registry.get("sockmap4j.colocated.agreements").tag("outcome", "off").functionCounter().count());
        assertEquals(ColocatedGrpc.upgrades(),
                registry.get("sockmap4j.colocated.agreements").tag("outcome", "upgraded").functionCounter().count());
    }
}
