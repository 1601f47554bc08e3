package io.github.sockmap4j.colocated.grpc;

import io.github.sockmap4j.colocated.HeapSpace;
import io.github.sockmap4j.colocated.SharedRegion;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;

/**
 * A co-located connection's heap, split between its ends: the region's creator (the client) lends
 * from the first half, the opener (the server) from the second. Each end places the bodies of
 * {@link LendableMessage}s in its own half, with bookkeeping kept here, in this process's memory,
 * and takes them back when the peer says it is done with one (a RETURNED frame naming exactly
 * what was lent, anything else a protocol error); it reads what the peer lent only from the
 * peer's half, each place checked before use.
 *
 * <p>Bounded at both ends without waiting: a body finds room in this end's half or goes through
 * the rings as bytes ({@link #place} answers -1), so a peer that keeps what it was lent makes this
 * end copy, never wait or grow.
 */
final class Lending {
    private static final LongAdder LENT = new LongAdder();
    private static final LongAdder LENT_BYTES = new LongAdder();
    private static final LongAdder NO_ROOM = new LongAdder();

    private final MemorySegment own;
    private final MemorySegment peer;
    private final HeapSpace space;
    /** What the peer holds of this end's half: place to length. */
    private final Map<Long, Long> lent = new ConcurrentHashMap<>();

    private Lending(SharedRegion region) {
        MemorySegment heap = region.heap();
        long half = heap.byteSize() / 2 & -HeapSpace.ALIGNMENT;
        MemorySegment first = heap.asSlice(0, half);
        MemorySegment second = heap.asSlice(half, half);
        this.own = region.isCreator() ? first : second;
        this.peer = region.isCreator() ? second : first;
        this.space = new HeapSpace(half);
    }

    /** The lending of {@code region}'s heap; null where it has none (its ends did not agree on lending). */
    static Lending of(SharedRegion region) {
        return region.heap().byteSize() >= 2 * HeapSpace.ALIGNMENT ? new Lending(region) : null;
    }

    /** Messages this process lent over co-located connections. */
    static long messagesLent() {
        return LENT.sum();
    }

    /** Those messages' bodies, in bytes: what did not go through a ring. */
    static long bytesLent() {
        return LENT_BYTES.sum();
    }

    /** Lendable messages this process copied through a ring because its half had no room for them. */
    static long noRoom() {
        return NO_ROOM.sum();
    }

    /**
     * Places {@code m}'s body in this end's half: where it is (from the half's start), or -1 where
     * no run of free bytes holds it now (the message then goes as bytes).
     */
    long place(LendableMessage m) throws IOException {
        long n = m.bodyBytes();
        if (n <= 0) {
            return -1;
        }
        long at = space.take(n);
        if (at < 0) {
            NO_ROOM.increment();
            return -1;
        }
        try {
            m.writeBody(own.asSlice(at, n));
        } catch (IOException | RuntimeException e) {
            space.give(at, n);
            throw e;
        }
        lent.put(at, n);
        LENT.increment();
        LENT_BYTES.add(n);
        return at;
    }

    /** A body placed and then not sent (its stream ended first): its room is free again. */
    void unsent(long at, long n) {
        if (lent.remove(at, n)) {
            space.give(at, n);
        }
    }

    /** The peer gave back the body at {@code at} of {@code n} bytes: exactly something lent, else the peer broke the protocol. */
    void returned(long at, long n) throws Frames.ProtocolException {
        if (!lent.remove(at, n)) {
            throw new Frames.ProtocolException("the peer gave back " + n + " bytes at " + at + " of the heap, which "
                    + "were not lent to it");
        }
        space.give(at, n);
    }

    /** The body the peer lent at {@code at}, {@code n} bytes, read-only; checked against the peer's half first. */
    MemorySegment peerBody(long at, long n) throws Frames.ProtocolException {
        if (n <= 0 || at < 0 || at % HeapSpace.ALIGNMENT != 0 || n > peer.byteSize() - at) {
            throw new Frames.ProtocolException("a body of " + n + " bytes at " + at + ", outside the peer's half of "
                    + "the heap (" + peer.byteSize() + " bytes)");
        }
        return peer.asSlice(at, n).asReadOnly();
    }

    /** Bytes of this end's half taken now (by bodies the peer holds). */
    long used() {
        return space.used();
    }

    /** What the peer holds now: bodies lent and not given back. */
    int outstanding() {
        return lent.size();
    }
}
