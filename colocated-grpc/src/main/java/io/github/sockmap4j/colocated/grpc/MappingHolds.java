package io.github.sockmap4j.colocated.grpc;

import io.github.sockmap4j.colocated.SharedRegion;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Who holds a connection's region mapped: the connection itself, until it unmaps, and each lent
 * body a reader keeps ({@link LentMessage#keep}). The region is closed when the last lets go, so
 * that no address into it outlives it; once closed, nobody can hold it again.
 */
final class MappingHolds {
    private final SharedRegion region;
    /** 1 for the connection, one more for each kept body; 0: unmapped. */
    private final AtomicInteger holds = new AtomicInteger(1);

    MappingHolds(SharedRegion region) {
        this.region = region;
    }

    /** Holds the mapping until {@link #release}; false where it is unmapped already. */
    boolean hold() {
        while (true) {
            int h = holds.get();
            if (h == 0) {
                return false;
            }
            if (holds.compareAndSet(h, h + 1)) {
                return true;
            }
        }
    }

    /** Lets go of a {@link #hold} (or the connection's own): the last one unmaps the region. */
    void release() {
        if (holds.decrementAndGet() == 0) {
            region.close();
        }
    }
}
