package io.github.sockmap4j.examples.rag;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.Comparator;
import java.util.SplittableRandom;
import java.util.stream.IntStream;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

class VectorIndexTest {
    @Property(tries = 60)
    void simdScoresEqualScalarScores(@ForAll @IntRange(min = 1, max = 700) int dim,
            @ForAll @IntRange(min = 1, max = 40) int n, @ForAll long seed) {
        SplittableRandom r = new SplittableRandom(seed);
        float[] data = new float[dim * n];
        float[] q = new float[dim];
        for (int i = 0; i < data.length; i++) {
            data[i] = (float) r.nextGaussian();
        }
        for (int i = 0; i < dim; i++) {
            q[i] = (float) r.nextGaussian();
        }
        float[] scalar = new float[n];
        float[] simd = new float[n];
        VectorIndex.SCALAR.scores(data, dim, q, scalar, n);
        new SimdScorer().scores(data, dim, q, simd, n);
        for (int d = 0; d < n; d++) {
            // Different summation orders: equal up to float rounding over dim terms.
            assertEquals(scalar[d], simd[d], 1e-4 * dim, "document " + d);
        }
    }

    @Property(tries = 200)
    void topKIsTheKLargestInOrder(@ForAll @IntRange(min = 0, max = 300) int n, @ForAll @IntRange(min = 1, max = 40) int k,
            @ForAll long seed) {
        SplittableRandom r = new SplittableRandom(seed);
        float[] scores = new float[n];
        for (int i = 0; i < n; i++) {
            scores[i] = r.nextInt(20) / 4f; // many ties
        }
        VectorIndex.Hits hits = VectorIndex.topK(scores, Math.min(k, n));
        int[] expected = IntStream.range(0, n).boxed()
                .sorted(Comparator.<Integer>comparingDouble(i -> -scores[i]).thenComparingInt(i -> i))
                .limit(Math.min(k, n)).mapToInt(Integer::intValue).toArray();
        assertArrayEquals(expected, hits.ids());
        for (int i = 0; i < expected.length; i++) {
            assertEquals(scores[expected[i]], hits.scores()[i]);
        }
    }

    @Test
    void aQuestionFindsChunksOfItsTopic() {
        Embedder e = new Embedder(128);
        VectorIndex index = VectorIndex.build(e, 7, 600);
        for (int t = 0; t < Corpus.TOPICS.length; t++) {
            VectorIndex.Hits hits = index.search(e.embed(Corpus.question(7, t)), 5);
            int topic = t;
            assertTrue(Arrays.stream(hits.ids()).filter(id -> id % Corpus.TOPICS.length == topic).count() >= 4,
                    "question " + t + " found " + Arrays.toString(hits.ids()));
        }
        assertTrue(index.scoring().startsWith(index.scorerName()), index.scoring());
    }
}
