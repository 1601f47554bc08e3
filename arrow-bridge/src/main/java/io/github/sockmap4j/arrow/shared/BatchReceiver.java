package io.github.sockmap4j.arrow.shared;

import io.github.sockmap4j.colocated.MessageRing;
import io.github.sockmap4j.colocated.RingCorruptException;
import io.github.sockmap4j.colocated.SharedRegion;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BoundsChecking;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.ForeignAllocation;
import org.apache.arrow.vector.VectorLoader;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.compression.NoCompressionCodec;
import org.apache.arrow.vector.ipc.message.ArrowFieldNode;
import org.apache.arrow.vector.ipc.message.ArrowRecordBatch;
import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.arrow.vector.util.ValueVectorUtility;

/**
 * The receiving end of Arrow batches lent by reference ({@link BatchSender}): each batch is read
 * in place, in the heap of the region this end mapped, and given back when the root {@link
 * #receive} returned is closed (with every vector and slice of it). Nothing of a batch is copied.
 *
 * <p>The sender's memory is untrusted input. Each message is copied out of the ring first and
 * checked whole: its counts against its length, every buffer's place against the heap's bounds,
 * every length a column can have, a batch number that was never used; the columns' buffers are
 * then checked against their row counts (Arrow's structural validation) before the root is handed
 * out. A message that fails closes the region and says why; nothing past the mapping is ever
 * read. The values themselves are read where they are, so a sender can still change them while
 * they are read (it could send other values as well); what it cannot do is make a read leave the
 * buffer it is in, since every buffer is an {@link ArrowBuf} of its checked length and Arrow's
 * bounds checks are on (this class refuses to run with them turned off). The heap's size is fixed
 * by the file's seals, so it cannot shrink under a reader.
 *
 * <p>Memory: this process maps the region once (at most the heap size it agreed to take, {@link
 * SharedRegion#open(int, long, long)}) and allocates nothing per batch beyond a few objects.
 * The mapping stays until this end is closed and the last batch it handed out is closed, so a
 * vector never points at memory gone. {@link #receive} is for one thread at a time; batches may
 * be closed on any.
 */
public final class BatchReceiver implements AutoCloseable {
    private final SharedRegion region;
    private final long heapAddress;
    private final long heapSize;
    private final MessageRing.Reader descriptors;
    private final MessageRing.Writer givingBack;
    private final MemorySegment giveBackScratch = Arena.ofAuto().allocate(8, 8);
    private final ConcurrentLinkedQueue<Long> toGiveBack = new ConcurrentLinkedQueue<>();
    private final AtomicInteger held = new AtomicInteger();
    private final Object lock = new Object();
    private Schema schema;
    private long lastBatch;
    private Message next;
    private volatile String closedBecause;
    private boolean unmapped;

    private sealed interface Message permits SchemaMessage, BatchMessage {
    }

    private record SchemaMessage(Schema schema) implements Message {
    }

    private record BatchMessage(long id, int rows, List<ArrowFieldNode> nodes, long[] places, List<Long> variadic)
            implements Message {
    }

    /** A receiver over {@code region} (mapped by this end from the sender's descriptor), which it owns from here. */
    public BatchReceiver(SharedRegion region) {
        if (!BoundsChecking.BOUNDS_CHECKING_ENABLED) {
            region.close();
            throw new IllegalStateException("Arrow's bounds checks are off (arrow.enable_unsafe_memory_access): a "
                    + "batch read in place could then be changed by its sender into reads past its buffers; receive "
                    + "batches by reference with the checks on");
        }
        this.region = region;
        this.heapAddress = region.heap().address();
        this.heapSize = region.heap().byteSize();
        this.descriptors = region.inbound().reader();
        this.givingBack = region.outbound().writer();
    }

    /**
     * The next batch, as a root of vectors over the heap whose buffers {@code allocator} accounts
     * for (and does not allocate): the caller closes it, which gives the batch back. Null when none
     * came within {@code timeout}.
     *
     * @throws IOException where the sender closed (after every batch it sent was received), or
     * sent what no sender of this protocol sends (the region is then closed, with the reason)
     */
    public VectorSchemaRoot receive(BufferAllocator allocator, Duration timeout) throws IOException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            BatchMessage b;
            synchronized (lock) {
                checkOpen();
                flushGiveBacks();
                b = takeBatch();
            }
            if (b != null) {
                return load(b, allocator);
            }
            if (region.peerClosed()) {
                synchronized (lock) {
                    if ((b = takeBatch()) != null) {
                        return load(b, allocator);
                    }
                }
                throw new IOException("the sender closed its end of the batch region");
            }
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                return null;
            }
            descriptors.awaitMessages(left, () -> closedBecause != null || region.peerClosed());
        }
    }

    /** Batches handed out and not closed yet. */
    public int held() {
        return held.get();
    }

    private void checkOpen() throws IOException {
        String why = closedBecause;
        if (why != null) {
            throw new IOException("the batch receiver is closed: " + why);
        }
    }

    /** Reads messages until a batch; schemas are kept as they come. Under the lock. */
    private BatchMessage takeBatch() throws IOException {
        try {
            while (true) {
                next = null;
                if (descriptors.poll(this::parse, 1) == 0) {
                    return null;
                }
                if (next instanceof SchemaMessage s) {
                    schema = s.schema();
                } else if (next instanceof BatchMessage b) {
                    return b;
                }
            }
        } catch (RingCorruptException | IllegalArgumentException e) {
            throw broken(e.getMessage(), e);
        } catch (IOException | RuntimeException e) {
            throw e;
        } catch (Exception e) {
            throw new IOException(e);
        }
    }

    private IOException broken(String why, Exception cause) {
        fail("the sender broke the protocol: " + why);
        return new IOException(closedBecause + "; the region is closed", cause);
    }

    /** Checks one message whole from this end's own copy of it. */
    private void parse(int kind, MemorySegment m) throws RingCorruptException {
        if (kind == BatchSender.SCHEMA) {
            try {
                next = new SchemaMessage(Schema.deserializeMessage(ByteBuffer.wrap(m.toArray(ValueLayout.JAVA_BYTE))));
            } catch (RuntimeException e) {
                throw new RingCorruptException("a schema that does not parse (" + e + ")");
            }
            return;
        }
        if (kind != BatchSender.BATCH) {
            throw new RingCorruptException("a message of kind " + kind);
        }
        if (schema == null) {
            throw new RingCorruptException("a batch before any schema");
        }
        long size = m.byteSize();
        if (size < BatchSender.DESCRIPTOR_HEADER) {
            throw new RingCorruptException("a batch described in " + size + " bytes");
        }
        long id = m.get(ValueLayout.JAVA_LONG, 0);
        int rows = m.get(ValueLayout.JAVA_INT, 8);
        int nodes = m.get(ValueLayout.JAVA_INT, 12);
        int buffers = m.get(ValueLayout.JAVA_INT, 16);
        int variadic = m.get(ValueLayout.JAVA_INT, 20);
        if (rows < 0 || nodes < 0 || buffers < 0 || variadic < 0 || size != BatchSender.DESCRIPTOR_HEADER
                + (long) BatchSender.NODE_BYTES * nodes + (long) BatchSender.BUFFER_BYTES * buffers
                + (long) BatchSender.VARIADIC_BYTES * variadic) {
            throw new RingCorruptException("a batch of " + rows + " rows, " + nodes + " columns' nodes, " + buffers
                    + " buffers and " + variadic + " variadic counts described in " + size + " bytes");
        }
        if (id <= lastBatch) {
            throw new RingCorruptException("batch " + id + " after batch " + lastBatch);
        }
        long at = BatchSender.DESCRIPTOR_HEADER;
        List<ArrowFieldNode> fieldNodes = new ArrayList<>(nodes);
        for (int i = 0; i < nodes; i++, at += BatchSender.NODE_BYTES) {
            long length = m.get(ValueLayout.JAVA_LONG, at);
            long nulls = m.get(ValueLayout.JAVA_LONG, at + 8);
            if (length < 0 || length > Integer.MAX_VALUE || nulls < 0 || nulls > length) {
                throw new RingCorruptException("column node " + i + " of " + length + " values, " + nulls + " null");
            }
            fieldNodes.add(new ArrowFieldNode(length, nulls));
        }
        long[] places = new long[2 * buffers];
        for (int i = 0; i < buffers; i++, at += BatchSender.BUFFER_BYTES) {
            long offset = m.get(ValueLayout.JAVA_LONG, at);
            long length = m.get(ValueLayout.JAVA_LONG, at + 8);
            if (length < 0 || length > heapSize || offset < 0 || offset > heapSize - length) {
                throw new RingCorruptException("buffer " + i + " of " + length + " bytes at " + offset
                        + ", outside the heap of " + heapSize + " bytes");
            }
            places[2 * i] = offset;
            places[2 * i + 1] = length;
        }
        List<Long> counts = new ArrayList<>(variadic);
        for (int i = 0; i < variadic; i++, at += BatchSender.VARIADIC_BYTES) {
            long v = m.get(ValueLayout.JAVA_LONG, at);
            if (v < 0 || v > buffers) {
                throw new RingCorruptException("a variadic buffer count of " + v + " in a batch of " + buffers + " buffers");
            }
            counts.add(v);
        }
        lastBatch = id;
        next = new BatchMessage(id, rows, fieldNodes, places, counts);
    }

    /**
     * A root over the batch's buffers in place: each non-empty buffer a foreign allocation of
     * {@code allocator}'s, the batch given back once the last of them is released.
     */
    private VectorSchemaRoot load(BatchMessage b, BufferAllocator allocator) throws IOException {
        int buffers = b.places().length / 2;
        AtomicInteger open = new AtomicInteger(1); // one for this method, released at its end
        held.incrementAndGet();
        List<ArrowBuf> bufs = new ArrayList<>(buffers);
        VectorSchemaRoot root = null;
        try {
            for (int i = 0; i < buffers; i++) {
                long length = b.places()[2 * i + 1];
                if (length == 0) {
                    bufs.add(allocator.getEmpty());
                    continue;
                }
                open.incrementAndGet();
                bufs.add(allocator.wrapForeignAllocation(new InPlace(length, heapAddress + b.places()[2 * i], b.id(), open)));
            }
            root = VectorSchemaRoot.create(schema, allocator);
            try (ArrowRecordBatch batch = new ArrowRecordBatch(b.rows(), b.nodes(), bufs,
                    NoCompressionCodec.DEFAULT_BODY_COMPRESSION, b.variadic(), false)) {
                new VectorLoader(root).load(batch);
            }
            ValueVectorUtility.validate(root);
            VectorSchemaRoot loaded = root;
            root = null;
            return loaded;
        } catch (RuntimeException e) {
            throw broken("batch " + b.id() + " does not load as its schema says (" + e.getMessage() + ")", e);
        } finally {
            if (root != null) {
                root.close();
            }
            bufs.forEach(buf -> buf.getReferenceManager().release());
            released(b.id(), open);
        }
    }

    /** One buffer of a batch, in place; releasing the batch's last gives the batch back. */
    private final class InPlace extends ForeignAllocation {
        private final long batch;
        private final AtomicInteger open;

        InPlace(long size, long address, long batch, AtomicInteger open) {
            super(size, address);
            this.batch = batch;
            this.open = open;
        }

        @Override
        protected void release0() {
            released(batch, open);
        }
    }

    private void released(long batch, AtomicInteger open) {
        if (open.decrementAndGet() != 0) {
            return;
        }
        toGiveBack.add(batch);
        synchronized (lock) {
            flushGiveBacks();
            if (held.decrementAndGet() == 0 && closedBecause != null) {
                unmap();
            }
        }
    }

    /** Says which batches are given back, as many as the ring takes now (the rest next time). Under the lock. */
    private void flushGiveBacks() {
        if (unmapped || closedBecause != null) {
            toGiveBack.clear();
            return;
        }
        Long id;
        boolean any = false;
        while ((id = toGiveBack.peek()) != null) {
            giveBackScratch.set(ValueLayout.JAVA_LONG, 0, id);
            try {
                if (!givingBack.offer(GIVE_BACK_KIND, giveBackScratch, 0, 8, false)) {
                    break;
                }
            } catch (RingCorruptException e) {
                fail("the sender broke the protocol: " + e.getMessage());
                return;
            }
            toGiveBack.poll();
            any = true;
        }
        if (any) {
            givingBack.wakeIfAsleep();
        }
    }

    private static final int GIVE_BACK_KIND = BatchSender.GIVE_BACK;

    private void fail(String why) {
        synchronized (lock) {
            if (closedBecause == null) {
                closedBecause = why;
                if (!unmapped) {
                    region.markClosed();
                }
                descriptors.interrupt();
            }
        }
    }

    private void unmap() {
        if (!unmapped) {
            unmapped = true;
            region.close();
        }
    }

    /**
     * Closes this end: the sender is told; the mapping goes now if no batch handed out is open,
     * else when the last is closed.
     */
    @Override
    public void close() {
        synchronized (lock) {
            flushGiveBacks();
            fail("closed by this process");
            if (held.get() == 0) {
                unmap();
            }
        }
    }
}
