package io.github.sockmap4j.examples.rag;

import java.util.EnumMap;
import java.util.Map;

/**
 * Where a request's time went in the measured phase, in milliseconds a request (means): the
 * request as the load generator saw it; each stage's own work (its handler, wall time); each hop
 * as the gateway's call saw it, and the part of it outside the called stage's handler (the
 * network, the hand-offs between threads and the waits for a CPU on both ends); each stage's
 * threads' waits for a CPU (summed over threads, so some of them overlap, and they fall inside
 * both parts). What the transport can change is in "the rest".
 */
record TimeBudget(double requestMillis, Map<RagService.Role, Double> ownMillis, Map<RagService.Role, Double> hopMillis,
        Map<RagService.Role, Double> waitMillis, double lentPerRequest) {
    /** The hops in the gateway's call order. */
    static final RagService.Role[] HOPS = {RagService.Role.EMBEDDING, RagService.Role.SEARCH, RagService.Role.CONTEXT};

    static final TimeBudget NONE = new TimeBudget(Double.NaN, Map.of(), Map.of(), Map.of(), Double.NaN);

    /**
     * The budget of {@code requests} requests whose mean latency was {@code requestMillis}, from
     * each stage's {@link StageClock.Times} over the phase and its threads' run-queue nanoseconds
     * (-1 where unknown). NaN where a stage could not say.
     */
    static TimeBudget of(double requestMillis, Map<RagService.Role, StageClock.Times> times,
            Map<RagService.Role, Long> waitNanos, long requests) {
        Map<RagService.Role, Double> own = new EnumMap<>(RagService.Role.class);
        Map<RagService.Role, Double> hop = new EnumMap<>(RagService.Role.class);
        Map<RagService.Role, Double> wait = new EnumMap<>(RagService.Role.class);
        StageClock.Times gw = times.getOrDefault(RagService.Role.GATEWAY, StageClock.Times.NONE);
        double hops = 0;
        for (int h = 0; h < HOPS.length; h++) {
            double ms = gw.calls() == 0 ? Double.NaN : gw.hopNanos(h) / 1e6 / gw.calls();
            hop.put(HOPS[h], ms);
            hops += ms;
        }
        long lent = 0;
        for (RagService.Role r : RagService.Role.values()) {
            StageClock.Times t = times.getOrDefault(r, StageClock.Times.NONE);
            lent = lent < 0 || t.lent() < 0 ? -1 : lent + t.lent();
            double handler = t.calls() == 0 ? Double.NaN : t.handlerNanos() / 1e6 / t.calls();
            // The gateway's handler waits out the three hops: its own work is what is left.
            own.put(r, r == RagService.Role.GATEWAY ? handler - hops : handler);
            long w = waitNanos.getOrDefault(r, -1L);
            wait.put(r, w < 0 || requests == 0 ? Double.NaN : w / 1e6 / requests);
        }
        return new TimeBudget(requestMillis, own, hop, wait, lent < 0 || requests == 0 ? Double.NaN : (double) lent / requests);
    }

    /** All stages' own work a request. */
    double ownTotal() {
        return ownMillis.values().stream().mapToDouble(Double::doubleValue).sum();
    }

    /** A hop's time outside the called stage's handler. */
    double hopRest(RagService.Role r) {
        return hopMillis.getOrDefault(r, Double.NaN) - ownMillis.getOrDefault(r, Double.NaN);
    }

    /** The request's time outside every stage's handler: the hops' rest and the load generator's hop. */
    double rest() {
        return requestMillis - ownTotal();
    }
}
