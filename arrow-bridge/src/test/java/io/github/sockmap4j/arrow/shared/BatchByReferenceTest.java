package io.github.sockmap4j.arrow.shared;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.arrow.Embeddings;
import io.github.sockmap4j.colocated.SharedRegion;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.OutOfMemoryException;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Arrow batches lent by reference between a sender and a receiver that map one region twice (as
 * two processes do; {@link SharedRegion#descriptorForPeer}): what is read is what was built, read
 * where it was built; memory given back, bounded, never pointed at once gone; a peer that breaks
 * the protocol closes the region and nothing else.
 */
class BatchByReferenceTest {
    private static final long RINGS = 64 * 1024;
    private final String name = "sm4j-test-batches-" + UUID.randomUUID();
    private BufferAllocator receiving;
    private final List<AutoCloseable> toClose = new ArrayList<>();

    @BeforeEach
    void allocator() {
        receiving = new RootAllocator();
    }

    @AfterEach
    void nothingLeft() throws Exception {
        for (int i = toClose.size() - 1; i >= 0; i--) {
            toClose.get(i).close();
        }
        receiving.close(); // throws where a batch handed out is still accounted for
        assertEquals(List.of(), regionsOpen(), "a region's descriptor or mapping is left");
    }

    private record Pair(BatchSender sender, BatchReceiver receiver, MemorySegment senderHeap, MemorySegment receiverHeap) {
    }

    private Pair pair(long heap, Duration wait) throws IOException {
        SharedRegion mine = SharedRegion.create(name, RINGS, heap);
        SharedRegion theirs = SharedRegion.open(mine.descriptorForPeer(), RINGS, heap);
        BatchSender s = new BatchSender(mine, wait);
        BatchReceiver r = new BatchReceiver(theirs);
        toClose.add(s);
        toClose.add(r);
        return new Pair(s, r, mine.heap(), theirs.heap());
    }

    private List<String> regionsOpen() throws IOException {
        return Mapped.regions(name);
    }

    private static VectorSchemaRoot people(BufferAllocator a, int rows, int seed) {
        VectorSchemaRoot root = VectorSchemaRoot.create(new org.apache.arrow.vector.types.pojo.Schema(List.of(
                org.apache.arrow.vector.types.pojo.Field.nullable("id", new org.apache.arrow.vector.types.pojo.ArrowType.Int(32, true)),
                org.apache.arrow.vector.types.pojo.Field.nullable("name", org.apache.arrow.vector.types.pojo.ArrowType.Utf8.INSTANCE))), a);
        fill(root, rows, seed);
        return root;
    }

    private static void fill(VectorSchemaRoot root, int rows, int seed) {
        IntVector id = (IntVector) root.getVector("id");
        VarCharVector n = (VarCharVector) root.getVector("name");
        root.allocateNew();
        for (int i = 0; i < rows; i++) {
            if (i % 7 == 3) {
                id.setNull(i);
                n.setNull(i);
            } else {
                id.setSafe(i, seed * 1000 + i);
                n.setSafe(i, ("row " + seed + "/" + i).getBytes(StandardCharsets.UTF_8));
            }
        }
        root.setRowCount(rows);
    }

    private static boolean inside(ArrowBuf b, MemorySegment heap) {
        return b.memoryAddress() >= heap.address()
                && b.memoryAddress() + b.readableBytes() <= heap.address() + heap.byteSize();
    }

    @Test
    void aBatchIsReadWhereTheSenderBuiltItAndEqualsIt() throws Exception {
        Pair p = pair(8L << 20, Duration.ofSeconds(5));
        try (VectorSchemaRoot sent = Embeddings.random(p.sender().allocator(), 100, 16, 7, true)) {
            p.sender().send(sent);
            try (VectorSchemaRoot got = p.receiver().receive(receiving, Duration.ofSeconds(5))) {
                assertNotNull(got);
                assertEquals(sent.contentToTSVString(), got.contentToTSVString());
                assertEquals(sent.getSchema(), got.getSchema());
                // read in place: each buffer received is the sender's, at the same place in the receiver's mapping
                List<ArrowBuf> mine = buffers(sent);
                List<ArrowBuf> theirs = buffers(got);
                assertEquals(mine.size(), theirs.size());
                for (int i = 0; i < mine.size(); i++) {
                    if (mine.get(i).readableBytes() == 0) {
                        continue;
                    }
                    assertTrue(inside(mine.get(i), p.senderHeap()) && inside(theirs.get(i), p.receiverHeap()),
                            "buffer " + i + " in the heap at both ends");
                    assertEquals(mine.get(i).memoryAddress() - p.senderHeap().address(),
                            theirs.get(i).memoryAddress() - p.receiverHeap().address(), "buffer " + i + "'s place");
                }
                assertEquals(0, receiving.getAllocatedMemory() - accountedInPlace(got),
                        "the receiver allocated nothing beyond the batch in place");
                assertEquals(1, p.receiver().held());
            }
            assertEquals(0, p.receiver().held());
            assertEquals(0, p.sender().lent(), "closing the batch gave it back");
        }
        assertEquals(0, p.sender().heapUsed(), "every byte of the heap is free again");
    }

    private static List<ArrowBuf> buffers(VectorSchemaRoot root) {
        List<ArrowBuf> all = new ArrayList<>();
        for (FieldVector v : root.getFieldVectors()) {
            buffers(v, all);
        }
        return all;
    }

    private static void buffers(FieldVector v, List<ArrowBuf> all) {
        all.addAll(v.getFieldBuffers());
        for (FieldVector c : v.getChildrenFromFields()) {
            buffers(c, all);
        }
    }

    private static long accountedInPlace(VectorSchemaRoot root) {
        long n = 0;
        for (FieldVector v : root.getFieldVectors()) {
            n += accounted(v);
        }
        return n;
    }

    private static long accounted(FieldVector v) {
        long n = 0;
        for (ArrowBuf b : v.getFieldBuffers()) {
            n += b.capacity();
        }
        for (FieldVector c : v.getChildrenFromFields()) {
            n += accounted(c);
        }
        return n;
    }

    @Test
    void theSenderRefillsItsRootWhileTheReceiverHoldsTheBatchBefore() throws Exception {
        Pair p = pair(8L << 20, Duration.ofSeconds(5));
        try (VectorSchemaRoot root = people(p.sender().allocator(), 1000, 1)) {
            String first = root.contentToTSVString();
            p.sender().send(root);
            fill(root, 500, 2);
            String second = root.contentToTSVString();
            p.sender().send(root);
            try (VectorSchemaRoot a = p.receiver().receive(receiving, Duration.ofSeconds(5));
                 VectorSchemaRoot b = p.receiver().receive(receiving, Duration.ofSeconds(5))) {
                assertEquals(first, a.contentToTSVString());
                assertEquals(second, b.contentToTSVString());
                assertEquals(2, p.sender().lent());
            }
            assertEquals(0, p.sender().lent());
            assertNull(p.receiver().receive(receiving, Duration.ofMillis(20)), "nothing more was sent");
        }
    }

    @Test
    void aChildAllocatorOfTheSendersClosesWhileItsBatchIsLent() throws Exception {
        Pair p = pair(8L << 20, Duration.ofSeconds(5));
        String sent;
        try (BufferAllocator child = p.sender().allocator().newChildAllocator("one batch", 0, Long.MAX_VALUE);
             VectorSchemaRoot root = people(child, 300, 8)) {
            p.sender().send(root);
            sent = root.contentToTSVString();
        }
        try (VectorSchemaRoot got = p.receiver().receive(receiving, Duration.ofSeconds(5))) {
            assertEquals(sent, got.contentToTSVString(), "the lent batch outlives the allocator it was built with");
            assertEquals(1, p.sender().lent());
        }
        assertEquals(0, p.sender().lent());
        assertEquals(0, p.sender().heapUsed());
    }

    @Test
    void aReceiverThatKeepsEveryBatchStopsTheSenderAndSaysWhy() throws Exception {
        Pair p = pair(1L << 20, Duration.ofMillis(200));
        List<VectorSchemaRoot> kept = new ArrayList<>();
        OutOfMemoryException full = null;
        try {
            for (int i = 0; i < 64 && full == null; i++) {
                try (VectorSchemaRoot root = Embeddings.random(p.sender().allocator(), 200, 256, i, false)) {
                    p.sender().send(root);
                    kept.add(p.receiver().receive(receiving, Duration.ofSeconds(5)));
                } catch (OutOfMemoryException e) {
                    full = e;
                }
            }
            assertNotNull(full, "a heap of 1 MiB took 64 batches of 200 KiB");
            assertTrue(full.getMessage().contains("the receiver holds") || full.getMessage().contains("receiver must close"),
                    full.getMessage());
            assertTrue(p.sender().heapUsed() <= p.sender().heapSize());
            assertEquals(kept.size(), p.sender().lent());
        } finally {
            kept.forEach(VectorSchemaRoot::close);
        }
        assertEquals(0, p.sender().lent());
        try (VectorSchemaRoot root = Embeddings.random(p.sender().allocator(), 200, 256, 99, false)) {
            p.sender().send(root); // room again once the batches were closed
            try (VectorSchemaRoot got = p.receiver().receive(receiving, Duration.ofSeconds(5))) {
                assertEquals(root.contentToTSVString(), got.contentToTSVString());
            }
        }
    }

    @Test
    void aBatchOutlivesTheReceiverThatHandedItOut() throws Exception {
        Pair p = pair(1L << 20, Duration.ofSeconds(5));
        try (VectorSchemaRoot root = people(p.sender().allocator(), 100, 3)) {
            p.sender().send(root);
            VectorSchemaRoot got = p.receiver().receive(receiving, Duration.ofSeconds(5));
            p.receiver().close();
            assertTrue(regionsOpen().size() > 0, "the mapping stays while a batch is open");
            assertEquals(root.contentToTSVString(), got.contentToTSVString());
            got.close();
            assertThrows(IOException.class, () -> p.sender().send(root), "the sender learns the receiver closed");
        }
    }

    @Test
    void aSenderThatClosesLetsTheReceiverTakeWhatWasSentThenSaysSo() throws Exception {
        Pair p = pair(1L << 20, Duration.ofSeconds(5));
        String sent;
        try (VectorSchemaRoot root = people(p.sender().allocator(), 10, 4)) {
            p.sender().send(root);
            sent = root.contentToTSVString();
        }
        p.sender().close();
        try (VectorSchemaRoot got = p.receiver().receive(receiving, Duration.ofSeconds(5))) {
            assertEquals(sent, got.contentToTSVString(), "the batch stays readable in the receiver's mapping");
        }
        IOException e = assertThrows(IOException.class, () -> p.receiver().receive(receiving, Duration.ofSeconds(5)));
        assertTrue(e.getMessage().contains("sender closed"), e.getMessage());
    }

    @Test
    void aBatchBuiltElsewhereIsRefusedWithWhatToDo() throws Exception {
        Pair p = pair(1L << 20, Duration.ofSeconds(5));
        try (BufferAllocator own = new RootAllocator(); VectorSchemaRoot root = people(own, 10, 5)) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> p.sender().send(root));
            assertTrue(e.getMessage().contains("allocator()"), e.getMessage());
        }
        assertEquals(0, p.sender().lent());
    }

    @Test
    void valuesChangedUnderTheReaderStayWithinTheirBuffers() throws Exception {
        Pair p = pair(1L << 20, Duration.ofSeconds(5));
        try (VectorSchemaRoot root = people(p.sender().allocator(), 100, 6)) {
            p.sender().send(root);
            try (VectorSchemaRoot got = p.receiver().receive(receiving, Duration.ofSeconds(5))) {
                // a sender rewrites a string's end offset after the receiver checked the batch
                VarCharVector names = (VarCharVector) got.getVector("name");
                long past = names.getDataBuffer().capacity() + 4096;
                ((VarCharVector) root.getVector("name")).getOffsetBuffer().setInt(4L * 2, (int) past);
                assertThrows(IndexOutOfBoundsException.class, () -> names.get(1));
                assertEquals(new String(((VarCharVector) root.getVector("name")).get(0), StandardCharsets.UTF_8),
                        new String(names.get(0), StandardCharsets.UTF_8));
            }
        }
    }

    @Test
    void aGiveBackOfABatchNeverLentClosesTheRegion() throws Exception {
        SharedRegion mine = SharedRegion.create(name, RINGS, 1L << 20);
        SharedRegion theirs = SharedRegion.open(mine.descriptorForPeer(), RINGS, 1L << 20);
        toClose.add(theirs);
        BatchSender s = new BatchSender(mine, Duration.ofSeconds(5));
        toClose.add(s);
        try (Arena a = Arena.ofConfined(); VectorSchemaRoot root = people(s.allocator(), 10, 7)) {
            MemorySegment m = a.allocate(8);
            m.set(ValueLayout.JAVA_LONG, 0, 12345);
            assertTrue(theirs.outbound().writer().offer(BatchSender.GIVE_BACK, m, 0, 8));
            IOException e = assertThrows(IOException.class, () -> s.send(root));
            assertTrue(e.getMessage().contains("not lent"), e.getMessage());
            assertTrue(theirs.peerClosed(), "the receiver is told the region is closed");
            assertThrows(IOException.class, () -> s.send(root));
        }
    }

    @Test
    void aDescriptorOutsideTheHeapClosesTheRegionAndNothingElse() throws Exception {
        SharedRegion mine = SharedRegion.create(name, RINGS, 1L << 20);
        toClose.add(mine);
        BatchReceiver r = new BatchReceiver(SharedRegion.open(mine.descriptorForPeer(), RINGS, 1L << 20));
        toClose.add(r);
        try (Arena a = Arena.ofConfined(); VectorSchemaRoot empty = people(receiving, 0, 0)) {
            byte[] schema = empty.getSchema().serializeAsMessage();
            assertTrue(mine.outbound().writer().offer(BatchSender.SCHEMA, MemorySegment.ofArray(schema), 0, schema.length));
            MemorySegment d = a.allocate(24 + 2 * 16 + 3 * 16);
            d.set(ValueLayout.JAVA_LONG, 0, 1);
            d.set(ValueLayout.JAVA_INT, 8, 1);
            d.set(ValueLayout.JAVA_INT, 12, 2);
            d.set(ValueLayout.JAVA_INT, 16, 3);
            d.set(ValueLayout.JAVA_LONG, 24, 1);
            d.set(ValueLayout.JAVA_LONG, 40, 1);
            d.set(ValueLayout.JAVA_LONG, 56, 0);
            d.set(ValueLayout.JAVA_LONG, 64, 64);
            d.set(ValueLayout.JAVA_LONG, 72, (1L << 20) - 8); // 16 bytes from 8 before the heap's end
            d.set(ValueLayout.JAVA_LONG, 80, 16);
            assertTrue(mine.outbound().writer().offer(BatchSender.BATCH, d, 0, (int) d.byteSize()));
            IOException e = assertThrows(IOException.class, () -> r.receive(receiving, Duration.ofSeconds(5)));
            assertTrue(e.getMessage().contains("outside the heap"), e.getMessage());
            assertTrue(mine.peerClosed(), "the sender is told the region is closed");
        }
    }
}
