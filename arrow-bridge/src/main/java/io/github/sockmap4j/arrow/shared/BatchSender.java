package io.github.sockmap4j.arrow.shared;

import io.github.sockmap4j.colocated.HeapSpace;
import io.github.sockmap4j.colocated.MessageRing;
import io.github.sockmap4j.colocated.RingCorruptException;
import io.github.sockmap4j.colocated.SharedRegion;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.arrow.memory.AllocationManager;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.OutOfMemoryException;
import org.apache.arrow.memory.ReferenceManager;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.VectorUnloader;
import org.apache.arrow.vector.compression.NoCompressionCodec;
import org.apache.arrow.vector.ipc.message.ArrowFieldNode;
import org.apache.arrow.vector.ipc.message.ArrowRecordBatch;
import org.apache.arrow.vector.types.pojo.Schema;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The sending end of Arrow batches lent by reference: a batch is built in the heap of a region
 * the receiver maps too ({@link #allocator()} places every buffer there), and {@link #send} tells
 * the receiver where its buffers are, a few dozen bytes a column, whatever the batch's size. The
 * receiver reads the batch in place and, once it has closed it, gives it back; until then the
 * batch's memory stays taken here, even if this process closes its own vectors or refills them.
 *
 * <p>Bounded at both ends: the heap is the region's, fixed when it was made, and no more than
 * {@link #maxLent()} batches are out at once; an allocation or a send that finds no room waits up
 * to the time given for the receiver to give batches back, then fails with what holds the room.
 * A receiver that keeps every batch it gets therefore stops this sender, never grows it.
 *
 * <p>Who can do what: the region is this connection's alone (one per connection, handed to the
 * other end of the connection only, {@link io.github.sockmap4j.colocated.Handover}); the receiver
 * can read and write what this end put in the heap, and nothing else of this process: where the
 * heap's free runs are is kept here, never in the region. What the receiver says back (a batch
 * it gives back) is checked against what was lent to it; anything else closes the connection's
 * region with the reason.
 *
 * <p>{@link #send} is for one thread at a time; allocating and closing vectors may happen on any.
 * The connection that carried the nonce is the lifeline: whoever holds it closes this sender
 * when it ends.
 */
public final class BatchSender implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(BatchSender.class);
    /** Ring message kinds, sender to receiver. */
    static final int SCHEMA = 1;
    static final int BATCH = 2;
    /** Ring message kind, receiver to sender. */
    static final int GIVE_BACK = 1;
    static final int DESCRIPTOR_HEADER = 24;
    static final int NODE_BYTES = 16;
    static final int BUFFER_BYTES = 16;
    static final int VARIADIC_BYTES = 8;
    /** How long a sleep lasts while waiting for room before looking at this process's own frees. */
    private static final long LOOK_NANOS = TimeUnit.MILLISECONDS.toNanos(10);

    private static final java.util.concurrent.atomic.LongAdder BATCHES = new java.util.concurrent.atomic.LongAdder();
    private static final java.util.concurrent.atomic.LongAdder BYTES = new java.util.concurrent.atomic.LongAdder();

    private final SharedRegion region;
    private final HeapSpace space;
    private final long heapAddress;
    private final long heapSize;
    private final Duration waitForRoom;
    private final RootAllocator allocator;
    private final MessageRing.Writer descriptors;
    private final MessageRing.Reader givenBack;
    private final Object givenBackLock = new Object();
    private final MemorySegment scratch;
    private final Map<Long, Lent> lent = new ConcurrentHashMap<>();
    private final AtomicLong lentBytes = new AtomicLong();
    private final AtomicLong placed = new AtomicLong();
    private final int maxLent;
    private long nextBatch = 1;
    private Schema schemaSent;
    private volatile String closedBecause;
    private volatile boolean unmapped;

    private record Lent(List<ArrowBuf> buffers, long bytes) {
    }

    /**
     * A sender over {@code region} (made by this end, with a heap: {@link SharedRegion#create(String,
     * long, long)}), which it owns from here; an allocation or a send that finds no room waits up
     * to {@code waitForRoom} for the receiver to give batches back.
     */
    public BatchSender(SharedRegion region, Duration waitForRoom) {
        if (region.heap().byteSize() == 0) {
            throw new IllegalArgumentException("the region has no heap: make it with SharedRegion.create(name, "
                    + "capacity, heapBytes)");
        }
        this.region = region;
        this.heapAddress = region.heap().address();
        this.heapSize = region.heap().byteSize();
        this.space = new HeapSpace(heapSize);
        this.waitForRoom = waitForRoom;
        this.descriptors = region.outbound().writer();
        this.givenBack = region.inbound().reader();
        this.scratch = Arena.ofAuto().allocate(region.outbound().maxMessage(), 8);
        // every give-back the receiver may owe fits its ring at once: it never waits to give one back
        this.maxLent = (int) Math.min(Integer.MAX_VALUE, region.inbound().capacity() / 32);
        this.allocator = new RootAllocator(RootAllocator.configBuilder()
                .allocationManagerFactory(new Placer())
                .build()); // no limit of Arrow's: lent batches are accounted here too; the heap, which waits, bounds it
    }

    /**
     * The allocator whose buffers are in the heap: build a batch's vectors with it (or with a
     * child of it) so that {@link #send} lends them as they are.
     */
    public BufferAllocator allocator() {
        return allocator;
    }

    /** Batches this process's senders have lent, all of them. */
    public static long batchesLent() {
        return BATCHES.sum();
    }

    /** The bytes of those batches' buffers: what did not go through a socket. */
    public static long bytesLent() {
        return BYTES.sum();
    }

    /** The most batches lent at once. */
    public int maxLent() {
        return maxLent;
    }

    /** Batches lent and not given back yet (having taken what the receiver gave back so far). */
    public int lent() {
        try {
            drainGivenBack();
        } catch (IOException e) {
            // closed: what is lent stays as it was
        }
        return lent.size();
    }

    /** Bytes of the heap taken now: by this process's buffers and by batches lent. */
    public long heapUsed() {
        return space.used();
    }

    /** The heap's size. */
    public long heapSize() {
        return heapSize;
    }

    /**
     * Lends the batch {@code root} holds now to the receiver: its row count, its columns' lengths
     * and null counts, and where each buffer is. Every non-empty buffer must be in the heap
     * ({@link #allocator()}); the schema goes along the first time and whenever it changed.
     * From here the batch's memory is the receiver's to read until it gives it back; this process
     * may close or refill {@code root} at once (refilled vectors get new memory).
     *
     * @throws IllegalArgumentException where a buffer is not in the heap (nothing was sent)
     * @throws IOException where the connection's region is closed, the receiver broke the
     * protocol (the region is then closed), or no room came within the wait
     */
    public synchronized void send(VectorSchemaRoot root) throws IOException {
        checkOpen();
        Schema schema = root.getSchema();
        if (!schema.equals(schemaSent)) {
            byte[] s = schema.serializeAsMessage();
            if (s.length > region.outbound().maxMessage()) {
                throw new IllegalArgumentException("a schema of " + s.length + " bytes; the ring carries at most "
                        + region.outbound().maxMessage() + ": make the region's rings larger");
            }
            MemorySegment.copy(MemorySegment.ofArray(s), 0, scratch, 0, s.length);
            offer(SCHEMA, s.length);
            schemaSent = schema;
        }
        VectorUnloader unloader = new VectorUnloader(root, true, NoCompressionCodec.INSTANCE, false);
        try (ArrowRecordBatch batch = unloader.getRecordBatch()) {
            List<ArrowFieldNode> nodes = batch.getNodes();
            List<ArrowBuf> buffers = batch.getBuffers();
            List<Long> variadic = batch.getVariadicBufferCounts();
            long length = DESCRIPTOR_HEADER + (long) NODE_BYTES * nodes.size() + (long) BUFFER_BYTES * buffers.size()
                    + (long) VARIADIC_BYTES * variadic.size();
            if (length > region.outbound().maxMessage()) {
                throw new IllegalArgumentException("a batch of " + buffers.size() + " buffers takes " + length
                        + " bytes to describe; the ring carries at most " + region.outbound().maxMessage()
                        + ": make the region's rings larger");
            }
            long id = nextBatch;
            long at = DESCRIPTOR_HEADER;
            for (ArrowFieldNode n : nodes) {
                scratch.set(ValueLayout.JAVA_LONG, at, n.getLength());
                scratch.set(ValueLayout.JAVA_LONG, at + 8, n.getNullCount());
                at += NODE_BYTES;
            }
            long bytes = 0;
            for (int i = 0; i < buffers.size(); i++) {
                ArrowBuf b = buffers.get(i);
                long size = b.readableBytes();
                long offset = 0;
                if (size > 0) {
                    offset = b.memoryAddress() + b.readerIndex() - heapAddress;
                    if (offset < 0 || offset > heapSize - size) {
                        throw new IllegalArgumentException("buffer " + i + " of the batch (" + size + " bytes) is not "
                                + "in the region's heap: build the batch's vectors with this sender's allocator()");
                    }
                }
                scratch.set(ValueLayout.JAVA_LONG, at, offset);
                scratch.set(ValueLayout.JAVA_LONG, at + 8, size);
                at += BUFFER_BYTES;
                bytes += size;
            }
            for (long v : variadic) {
                scratch.set(ValueLayout.JAVA_LONG, at, v);
                at += VARIADIC_BYTES;
            }
            scratch.set(ValueLayout.JAVA_LONG, 0, id);
            scratch.set(ValueLayout.JAVA_INT, 8, batch.getLength());
            scratch.set(ValueLayout.JAVA_INT, 12, nodes.size());
            scratch.set(ValueLayout.JAVA_INT, 16, buffers.size());
            scratch.set(ValueLayout.JAVA_INT, 20, variadic.size());
            awaitLendable();
            // held in this sender's own root allocator, not the one the root was built with: a child
            // allocator of the caller's may close while its batch is still lent
            List<ArrowBuf> held = new ArrayList<>(buffers.size());
            for (ArrowBuf b : buffers) {
                if (b.readableBytes() > 0) {
                    held.add(b.getReferenceManager().retain(b, allocator));
                }
            }
            lent.put(id, new Lent(held, bytes));
            lentBytes.addAndGet(bytes);
            nextBatch++;
            try {
                offer(BATCH, (int) length);
            } catch (IOException | RuntimeException e) {
                giveBack(id);
                throw e;
            }
            BATCHES.increment();
            BYTES.add(bytes);
        }
    }

    private void awaitLendable() throws IOException {
        long deadline = System.nanoTime() + waitForRoom.toNanos();
        while (true) {
            checkOpen();
            drainGivenBack();
            if (lent.size() < maxLent) {
                return;
            }
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                throw new IOException("the receiver holds " + lent.size() + " batches, the most lent at once, and "
                        + "gave none back within " + waitForRoom + ": it must close the batches it received");
            }
            awaitGivenBack(left);
        }
    }

    private void offer(int kind, int length) throws IOException {
        long deadline = System.nanoTime() + waitForRoom.toNanos();
        while (!descriptors.offer(kind, scratch, 0, length)) {
            checkOpen();
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                throw new IOException("the receiver read no message within " + waitForRoom + " (its ring is full)");
            }
            descriptors.awaitSpace(length, Math.min(left, LOOK_NANOS));
        }
    }

    /**
     * Takes what the receiver gave back, checking each against what was lent; the buffers are
     * released after the ring's lock is let go (Arrow's release takes locks of its own).
     */
    private void drainGivenBack() throws IOException {
        List<Lent> back = new ArrayList<>();
        try {
            synchronized (givenBackLock) {
                if (unmapped) {
                    return;
                }
                givenBack.poll((kind, message) -> {
                    if (kind != GIVE_BACK || message.byteSize() != 8) {
                        throw new RingCorruptException("a message of kind " + kind + " and " + message.byteSize()
                                + " bytes from the receiver, where only give-backs (kind " + GIVE_BACK + ", 8 bytes) come");
                    }
                    long id = message.get(ValueLayout.JAVA_LONG, 0);
                    Lent l = lent.remove(id);
                    if (l == null) {
                        throw new RingCorruptException("the receiver gave back batch " + id + ", which is not lent to it");
                    }
                    back.add(l);
                }, Integer.MAX_VALUE);
            }
        } catch (RingCorruptException e) {
            fail(e.getMessage());
            throw new IOException("the receiver broke the protocol: " + e.getMessage() + "; the region is closed", e);
        } catch (IOException | RuntimeException e) {
            throw e;
        } catch (Exception e) {
            throw new IOException(e);
        } finally {
            back.forEach(this::release);
        }
    }

    private void giveBack(long id) {
        Lent l = lent.remove(id);
        if (l != null) {
            release(l);
        }
    }

    private void release(Lent l) {
        lentBytes.addAndGet(-l.bytes());
        l.buffers().forEach(b -> b.getReferenceManager().release());
    }

    private void awaitGivenBack(long leftNanos) {
        synchronized (givenBackLock) {
            if (!unmapped) {
                givenBack.awaitMessages(Math.min(leftNanos, LOOK_NANOS), () -> closedBecause != null);
            }
        }
    }

    private void checkOpen() throws IOException {
        String why = closedBecause;
        if (why != null) {
            throw new IOException("the batch sender is closed: " + why);
        }
        if (region.peerClosed()) {
            throw new IOException("the receiver closed its end of the batch region");
        }
    }

    private long place(long size) {
        long deadline = System.nanoTime() + waitForRoom.toNanos();
        while (true) {
            try {
                checkOpen();
                drainGivenBack();
            } catch (IOException e) {
                throw new OutOfMemoryException("no room in the batch heap: " + e.getMessage(), e);
            }
            long at = space.take(size);
            if (at >= 0) {
                placed.incrementAndGet();
                return at;
            }
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                throw new OutOfMemoryException("the batch heap of " + heapSize + " bytes has no run of " + size
                        + " bytes free after " + waitForRoom + ": " + lentBytes.get() + " bytes are in " + lent.size()
                        + " batches the receiver holds, " + (space.used() - lentBytes.get()) + " in this process's "
                        + "buffers; the receiver must close the batches it received, or the heap must be larger");
            }
            awaitGivenBack(left);
        }
    }

    private void fail(String why) {
        if (closedBecause == null) {
            closedBecause = why;
            region.markClosed();
        }
    }

    /**
     * Closes this end: the receiver is told (what it holds stays readable in its own mapping), the
     * batches lent are taken back, and the allocator closed. The region is unmapped here once no
     * buffer of this process is in it; a buffer still open keeps it mapped until it is closed
     * (with a warning), so that no vector of this process ever points at memory gone.
     */
    @Override
    public void close() {
        fail("closed by this process");
        synchronized (this) { // a send under way ends first (it sees the close within a look)
            for (Long id : List.copyOf(lent.keySet())) {
                giveBack(id);
            }
        }
        long held = allocator.getAllocatedMemory();
        if (held == 0) {
            allocator.close();
        } else {
            LOG.warn("closing a batch sender whose allocator still has {} bytes in buffers: its region stays mapped "
                    + "until they are closed", held);
        }
        unmapIfDone();
    }

    private void unmapIfDone() {
        synchronized (givenBackLock) {
            if (closedBecause != null && placed.get() == 0 && !unmapped) {
                unmapped = true;
                region.close();
            }
        }
    }

    /** Places each buffer of {@link #allocator()} in the heap. */
    private final class Placer implements AllocationManager.Factory {
        private final ArrowBuf empty = new ArrowBuf(ReferenceManager.NO_OP, null, 0, heapAddress);

        @Override
        public AllocationManager create(BufferAllocator accounting, long size) {
            return new Placed(accounting, size, place(size));
        }

        @Override
        public ArrowBuf empty() {
            return empty;
        }
    }

    private final class Placed extends AllocationManager {
        private final long size;
        private final long at;

        Placed(BufferAllocator accounting, long size, long at) {
            super(accounting);
            this.size = size;
            this.at = at;
        }

        @Override
        public long getSize() {
            return size;
        }

        @Override
        protected long memoryAddress() {
            return heapAddress + at;
        }

        @Override
        protected void release0() {
            space.give(at, size);
            if (placed.decrementAndGet() == 0 && closedBecause != null) {
                unmapIfDone();
            }
        }
    }
}
