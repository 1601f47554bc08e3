package io.github.sockmap4j.examples.rag;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.SplittableRandom;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.junit.jupiter.api.Test;

class ArrowMessagesTest {
    @Property(tries = 40)
    void candidatesRoundTrip(@ForAll @IntRange(min = 0, max = 64) int n, @ForAll @IntRange(min = 1, max = 520) int dim,
            @ForAll long seed) {
        SplittableRandom r = new SplittableRandom(seed);
        int[] ids = new int[n];
        float[] scores = new float[n];
        float[][] vectors = new float[n][dim];
        String[] chunks = new String[n];
        for (int i = 0; i < n; i++) {
            ids[i] = r.nextInt();
            scores[i] = (float) r.nextDouble(-1, 1);
            for (int d = 0; d < dim; d++) {
                vectors[i][d] = (float) r.nextGaussian();
            }
            chunks[i] = Corpus.chunk(seed, i) + " é ✓";
        }
        try (BufferAllocator alloc = new RootAllocator()) {
            byte[] ipc = ArrowMessages.encodeCandidates(alloc,
                    new ArrowMessages.Candidates("q? ✓", ids, scores, vectors, chunks), dim);
            ArrowMessages.Candidates back = ArrowMessages.decodeCandidates(alloc, ipc);
            assertEquals("q? ✓", back.question());
            assertArrayEquals(ids, back.ids());
            assertArrayEquals(scores, back.scores());
            assertArrayEquals(chunks, back.chunks());
            for (int i = 0; i < n; i++) {
                assertArrayEquals(vectors[i], back.vectors()[i]);
            }
            assertEquals(0, alloc.getAllocatedMemory(), "nothing left allocated");
        }
    }

    @Test
    void queryRoundTripsAndGarbageIsRefusedByName() {
        try (BufferAllocator alloc = new RootAllocator()) {
            float[] v = new Embedder(384).embed("how does the sockmap redirect?");
            ArrowMessages.Query back = ArrowMessages.decodeQuery(alloc,
                    ArrowMessages.encodeQuery(alloc, new ArrowMessages.Query("how?", v)));
            assertEquals("how?", back.question());
            assertArrayEquals(v, back.vector());
            RuntimeException e = assertThrows(RuntimeException.class,
                    () -> ArrowMessages.decodeCandidates(alloc, "not arrow at all".getBytes()));
            assertEquals(true, e.getMessage() != null && !e.getMessage().isEmpty());
            assertEquals(0, alloc.getAllocatedMemory());
        }
    }
}
