package io.github.sockmap4j.examples.rag;

import java.util.concurrent.atomic.LongAdder;

/**
 * Where a stage's calls spend their time, as the stage sees it: how long its handler ran (its own
 * work, wall time on the handler's thread) and, for the gateway, how long each downstream call
 * took from its side (the hop: the other stage's work and everything around it). The demo reads
 * it before and after the measured phase to split a request's time.
 *
 * <p><b>Note:</b> threadsafe.
 */
final class StageClock {
    /** The gateway's hops, in call order. */
    static final int HOPS = 3;

    private final LongAdder handlerNanos = new LongAdder();
    private final LongAdder calls = new LongAdder();
    private final LongAdder[] hopNanos = {new LongAdder(), new LongAdder(), new LongAdder()};

    void handled(long nanos) {
        handlerNanos.add(nanos);
        calls.increment();
    }

    void hop(int hop, long nanos) {
        hopNanos[hop].add(nanos);
    }

    Times now() {
        return new Times(handlerNanos.sum(), calls.sum(), hopNanos[0].sum(), hopNanos[1].sum(), hopNanos[2].sum(), -1);
    }

    /**
     * The sums so far: handler time, calls handled, the time of each hop's calls, and the messages
     * the stage's process lent over co-located connections ({@code -1}: not known, as for a stage
     * that shares its JVM, whose process-wide count is not its own).
     */
    record Times(long handlerNanos, long calls, long hop0Nanos, long hop1Nanos, long hop2Nanos, long lent) {
        static final Times NONE = new Times(0, 0, 0, 0, 0, -1);

        /** The same with the process's lent messages: for a stage alone in its process. */
        Times withLent(long lent) {
            return new Times(handlerNanos, calls, hop0Nanos, hop1Nanos, hop2Nanos, lent);
        }

        long hopNanos(int hop) {
            return switch (hop) {
                case 0 -> hop0Nanos;
                case 1 -> hop1Nanos;
                case 2 -> hop2Nanos;
                default -> throw new IllegalArgumentException("hop " + hop);
            };
        }

        Times minus(Times before) {
            return new Times(handlerNanos - before.handlerNanos, calls - before.calls, hop0Nanos - before.hop0Nanos,
                    hop1Nanos - before.hop1Nanos, hop2Nanos - before.hop2Nanos,
                    lent < 0 || before.lent < 0 ? -1 : lent - before.lent);
        }

        Times plus(Times other) {
            return new Times(handlerNanos + other.handlerNanos, calls + other.calls, hop0Nanos + other.hop0Nanos,
                    hop1Nanos + other.hop1Nanos, hop2Nanos + other.hop2Nanos,
                    lent < 0 || other.lent < 0 ? -1 : lent + other.lent);
        }

        /** The line a stage process answers {@code TIMES} with. */
        String line() {
            return "TIMES " + handlerNanos + " " + calls + " " + hop0Nanos + " " + hop1Nanos + " " + hop2Nanos + " " + lent;
        }

        /** A {@link #line()} read back. */
        static Times parse(String line) {
            String[] f = line.trim().split(" ");
            if (f.length != 7 || !f[0].equals("TIMES")) {
                throw new IllegalArgumentException("not a TIMES line: " + line);
            }
            return new Times(Long.parseLong(f[1]), Long.parseLong(f[2]), Long.parseLong(f[3]), Long.parseLong(f[4]),
                    Long.parseLong(f[5]), Long.parseLong(f[6]));
        }
    }
}
