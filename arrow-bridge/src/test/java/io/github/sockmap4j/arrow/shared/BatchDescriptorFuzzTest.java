package io.github.sockmap4j.arrow.shared;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.colocated.SharedRegion;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.List;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.Schema;

/**
 * A sender that writes what it likes into the ring: descriptors whose counts, places, lengths and
 * batch numbers are drawn near and past every bound the receiver checks. Whatever comes, the
 * receiver either hands out a batch whose buffers all lie in the heap and that Arrow's structural
 * checks accept, or closes the region with an {@link IOException} saying why; reading a batch it
 * handed out stays within its buffers; nothing is left mapped or accounted afterwards.
 */
class BatchDescriptorFuzzTest {
    private static final long RINGS = 16 * 1024;
    private static final long HEAP = 64 * 1024;
    private static final Schema SCHEMA = new Schema(List.of(
            Field.nullable("id", new ArrowType.Int(32, true)),
            Field.nullable("name", ArrowType.Utf8.INSTANCE)));

    record Buffer(long offset, long length) {
    }

    record Descriptor(long id, int rows, List<long[]> nodes, List<Buffer> buffers, List<Long> variadic, int lengthSkew) {
    }

    @Provide
    Arbitrary<Descriptor> descriptors() {
        Arbitrary<Long> places = Arbitraries.oneOf(Arbitraries.longs().between(0, HEAP),
                Arbitraries.of(-1L, HEAP - 1, HEAP, HEAP + 1, Long.MAX_VALUE, Long.MIN_VALUE, 0L, 64L));
        Arbitrary<Long> lengths = Arbitraries.oneOf(Arbitraries.longs().between(0, 4096),
                Arbitraries.of(-1L, 0L, HEAP, HEAP + 1, Long.MAX_VALUE));
        Arbitrary<long[]> nodes = Arbitraries.longs().between(-2, 40).array(long[].class).ofSize(2);
        return net.jqwik.api.Combinators.combine(
                Arbitraries.of(-1L, 0L, 1L, 2L, Long.MAX_VALUE),
                Arbitraries.integers().between(-1, 40),
                Arbitraries.frequencyOf(net.jqwik.api.Tuple.of(3, nodes.list().ofSize(2)),
                        net.jqwik.api.Tuple.of(1, nodes.list().ofMinSize(0).ofMaxSize(3))),
                Arbitraries.frequencyOf(net.jqwik.api.Tuple.of(3, buffers(places, lengths).list().ofSize(5)),
                        net.jqwik.api.Tuple.of(1, buffers(places, lengths).list().ofMinSize(0).ofMaxSize(6))),
                Arbitraries.frequencyOf(net.jqwik.api.Tuple.of(3, Arbitraries.just(List.<Long>of())),
                        net.jqwik.api.Tuple.of(1, Arbitraries.longs().between(-1, 3).list().ofMaxSize(2))),
                Arbitraries.of(0, 0, 0, -8, 8, 1))
                .as(Descriptor::new);
    }

    private static Arbitrary<Buffer> buffers(Arbitrary<Long> places, Arbitrary<Long> lengths) {
        return net.jqwik.api.Combinators.combine(places, lengths).as(Buffer::new);
    }

    @Property(tries = 300)
    void whateverTheSenderWritesTheReceiverReadsWithinTheHeapOrCloses(@ForAll("descriptors") Descriptor d) throws Exception {
        try (BufferAllocator allocator = new RootAllocator();
             SharedRegion sender = SharedRegion.create("sm4j-test-fuzz", RINGS, HEAP)) {
            BatchReceiver receiver = new BatchReceiver(SharedRegion.open(sender.descriptorForPeer(), RINGS, HEAP));
            try {
                for (int i = 0; i < 4096; i += 4) {
                    sender.heap().set(ValueLayout.JAVA_INT, i, i * 7); // offsets that rise, values that vary
                }
                byte[] schema = SCHEMA.serializeAsMessage();
                assertTrue(sender.outbound().writer().offer(BatchSender.SCHEMA, MemorySegment.ofArray(schema), 0, schema.length));
                MemorySegment m = encode(d);
                assertTrue(sender.outbound().writer().offer(BatchSender.BATCH, m, 0, (int) m.byteSize()));
                VectorSchemaRoot root;
                try {
                    root = receiver.receive(allocator, Duration.ofSeconds(5));
                } catch (IOException refused) {
                    assertTrue(refused.getMessage().contains("broke the protocol"), refused.getMessage());
                    assertTrue(sender.peerClosed(), "the sender is told");
                    net.jqwik.api.statistics.Statistics.collect("refused");
                    return;
                }
                try (root) {
                    assertEquals(d.rows(), root.getRowCount());
                    net.jqwik.api.statistics.Statistics.collect("handed out");
                    try {
                        root.contentToTSVString();
                    } catch (IndexOutOfBoundsException | IllegalArgumentException | IllegalStateException outside) {
                        // values that point past their buffer are refused by the buffer, never read
                    }
                }
            } finally {
                receiver.close();
            }
        }
    }

    private static MemorySegment encode(Descriptor d) {
        long size = 24 + 16L * d.nodes().size() + 16L * d.buffers().size() + 8L * d.variadic().size();
        MemorySegment m = MemorySegment.ofArray(new long[(int) (size / 8) + 2]);
        m.set(ValueLayout.JAVA_LONG, 0, d.id());
        m.set(ValueLayout.JAVA_INT, 8, d.rows());
        m.set(ValueLayout.JAVA_INT, 12, d.nodes().size());
        m.set(ValueLayout.JAVA_INT, 16, d.buffers().size());
        m.set(ValueLayout.JAVA_INT, 20, d.variadic().size());
        long at = 24;
        for (long[] n : d.nodes()) {
            m.set(ValueLayout.JAVA_LONG, at, n[0]);
            m.set(ValueLayout.JAVA_LONG, at + 8, n[1]);
            at += 16;
        }
        for (Buffer b : d.buffers()) {
            m.set(ValueLayout.JAVA_LONG, at, b.offset());
            m.set(ValueLayout.JAVA_LONG, at + 8, b.length());
            at += 16;
        }
        for (long v : d.variadic()) {
            m.set(ValueLayout.JAVA_LONG, at, v);
            at += 8;
        }
        return m.asSlice(0, Math.max(0, Math.min(m.byteSize(), size + d.lengthSkew())));
    }
}
