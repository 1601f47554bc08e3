package io.github.sockmap4j.examples.rag;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.SplittableRandom;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.FloatRange;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

class ContextAssemblerTest {
    @Property(tries = 200)
    void choosesAtMostKDistinctCandidatesAtOrAboveTheThreshold(@ForAll @IntRange(min = 0, max = 40) int n,
            @ForAll @IntRange(min = 1, max = 10) int k, @ForAll @FloatRange(min = -1, max = 1) float threshold,
            @ForAll long seed) {
        ArrowMessages.Candidates c = random(n, seed);
        int[] chosen = new ContextAssembler(threshold, k, 0.7f).select(c);
        long eligible = 0;
        for (float s : c.scores()) {
            eligible += s >= threshold ? 1 : 0;
        }
        assertEquals(Math.min(k, eligible), chosen.length);
        assertEquals(chosen.length, Arrays.stream(chosen).distinct().count());
        for (int p : chosen) {
            assertTrue(c.scores()[p] >= threshold);
        }
        if (chosen.length > 0) {
            float best = Float.NEGATIVE_INFINITY;
            for (float s : c.scores()) {
                best = Math.max(best, s);
            }
            assertEquals(best, c.scores()[chosen[0]], "the first pick is the most relevant");
        }
    }

    @Test
    void aNearCopyOfAChosenChunkYieldsToADifferentOne() {
        float[] a = new Embedder(64).embed("kernel sockmap redirect verdict");
        float[] b = new Embedder(64).embed("arrow batch column buffer");
        ArrowMessages.Candidates c = new ArrowMessages.Candidates("q", new int[] {1, 2, 3},
                new float[] {0.90f, 0.89f, 0.80f}, new float[][] {a, a.clone(), b}, new String[] {"x", "x again", "y"});
        int[] chosen = new ContextAssembler(0.5f, 2, 0.7f).select(c);
        assertEquals(0, chosen[0]);
        assertEquals(2, chosen[1], "the copy of the first pick goes after the different chunk");
        String prompt = new ContextAssembler(0.5f, 2, 0.7f).assemble(c);
        assertTrue(prompt.contains("doc 1") && prompt.contains("doc 3") && !prompt.contains("doc 2"), prompt);
        assertTrue(prompt.endsWith("Question: q"), prompt);
    }

    static ArrowMessages.Candidates random(int n, long seed) {
        SplittableRandom r = new SplittableRandom(seed);
        float[] scores = new float[n];
        for (int i = 0; i < n; i++) {
            scores[i] = (float) r.nextDouble(-1, 1);
        }
        return Corpus.candidates(seed, new Embedder(32), scores);
    }
}
