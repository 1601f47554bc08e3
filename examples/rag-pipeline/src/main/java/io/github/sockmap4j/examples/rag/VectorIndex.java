package io.github.sockmap4j.examples.rag;

import java.util.Arrays;
import java.util.Locale;

/**
 * An in-memory flat index of unit vectors: a query's cosine similarity to every document is one
 * dot product, scored by the {@link Scorer} that measured faster on this machine when the index
 * was built (the Vector API's, or a scalar loop when that is not faster or not present).
 */
public final class VectorIndex {
    /** Dot products of a query against {@code n} consecutive vectors of a flat array. */
    public interface Scorer {
        void scores(float[] data, int dim, float[] query, float[] out, int n);

        String name();
    }

    /** The plain loop; what the JIT makes of it (it may auto-vectorise part of it). */
    public static final Scorer SCALAR = new Scorer() {
        @Override
        public void scores(float[] data, int dim, float[] q, float[] out, int n) {
            for (int d = 0, off = 0; d < n; d++, off += dim) {
                float s = 0;
                for (int i = 0; i < dim; i++) {
                    s += data[off + i] * q[i];
                }
                out[d] = s;
            }
        }

        @Override
        public String name() {
            return "scalar";
        }
    };

    /** A search result: ids and scores, best first. */
    public record Hits(int[] ids, float[] scores) {
    }

    private final int dim;
    private final int size;
    private final float[] data;
    private final Scorer scorer;
    private final String choice;

    private VectorIndex(int dim, float[] data, Scorer scorer, String choice) {
        this.dim = dim;
        this.size = data.length / dim;
        this.data = data;
        this.scorer = scorer;
        this.choice = choice;
    }

    /** Embeds {@code docs} chunks of the corpus and picks the faster scorer by measuring both. */
    public static VectorIndex build(Embedder embedder, long seed, int docs) {
        int dim = embedder.dim();
        float[] data = new float[Math.multiplyExact(docs, dim)];
        for (int i = 0; i < docs; i++) {
            System.arraycopy(embedder.embed(Corpus.chunk(seed, i)), 0, data, i * dim, dim);
        }
        Scorer simd;
        try {
            simd = new SimdScorer();
        } catch (LinkageError e) { // this JVM runs without the jdk.incubator.vector module
            simd = null;
        }
        if (simd == null) {
            return new VectorIndex(dim, data, SCALAR, "scalar (the Vector API is not available: run with --add-modules jdk.incubator.vector)");
        }
        float[] q = embedder.embed(Corpus.question(seed, 0));
        float[] out = new float[docs];
        double scalarNs = time(SCALAR, data, dim, q, out, docs);
        double simdNs = time(simd, data, dim, q, out, docs);
        Scorer pick = simdNs < scalarNs ? simd : SCALAR;
        String choice = String.format(Locale.ROOT, "%s (%s %.3f ms/query, scalar %.3f ms/query over %,d x %d)",
                pick.name(), simd.name(), simdNs / 1e6, scalarNs / 1e6, docs, dim);
        return new VectorIndex(dim, data, pick, choice);
    }

    /** Median time of one full scoring pass, after a warm-up. */
    private static double time(Scorer s, float[] data, int dim, float[] q, float[] out, int n) {
        long budget = Math.max(20, 200_000_000L / Math.max(1, (long) n * dim)); // passes: ~2e8 multiply-adds
        for (int i = 0; i < budget; i++) {
            s.scores(data, dim, q, out, n);
        }
        long[] t = new long[15];
        for (int r = 0; r < t.length; r++) {
            long t0 = System.nanoTime();
            s.scores(data, dim, q, out, n);
            t[r] = System.nanoTime() - t0;
        }
        Arrays.sort(t);
        return t[t.length / 2];
    }

    public int dim() {
        return dim;
    }

    public int size() {
        return size;
    }

    /** Which scorer is used and what each measured. */
    public String scoring() {
        return choice;
    }

    public String scorerName() {
        return scorer.name();
    }

    /** Document {@code id}'s vector (a copy). */
    public float[] vector(int id) {
        return Arrays.copyOfRange(data, id * dim, (id + 1) * dim);
    }

    /** The {@code k} documents most similar to {@code query} (a unit vector), best first. */
    public Hits search(float[] query, int k) {
        if (query.length != dim) {
            throw new IllegalArgumentException("query has " + query.length + " dimensions, the index " + dim);
        }
        float[] scores = new float[size];
        scorer.scores(data, dim, query, scores, size);
        return topK(scores, Math.min(k, size));
    }

    /** The indexes of the {@code k} largest values, largest first (ties: lower index first). */
    static Hits topK(float[] scores, int k) {
        // A min-heap of the best k so far, kept in two parallel arrays.
        int[] ids = new int[k];
        float[] best = new float[k];
        int n = 0;
        for (int i = 0; i < scores.length; i++) {
            float s = scores[i];
            if (n < k) {
                ids[n] = i;
                best[n] = s;
                siftUp(ids, best, n++);
            } else if (k > 0 && s > best[0]) {
                ids[0] = i;
                best[0] = s;
                siftDown(ids, best, k);
            }
        }
        // Pop in ascending order, fill from the back.
        int[] outIds = new int[n];
        float[] outScores = new float[n];
        for (int m = n; m > 0; m--) {
            outIds[m - 1] = ids[0];
            outScores[m - 1] = best[0];
            ids[0] = ids[m - 1];
            best[0] = best[m - 1];
            siftDown(ids, best, m - 1);
        }
        return new Hits(outIds, outScores);
    }

    private static boolean less(int[] ids, float[] s, int a, int b) {
        return s[a] < s[b] || (s[a] == s[b] && ids[a] > ids[b]);
    }

    private static void siftUp(int[] ids, float[] s, int i) {
        while (i > 0) {
            int p = (i - 1) / 2;
            if (!less(ids, s, i, p)) {
                return;
            }
            swap(ids, s, i, p);
            i = p;
        }
    }

    private static void siftDown(int[] ids, float[] s, int n) {
        int i = 0;
        while (true) {
            int l = 2 * i + 1;
            if (l >= n) {
                return;
            }
            int c = l + 1 < n && less(ids, s, l + 1, l) ? l + 1 : l;
            if (!less(ids, s, c, i)) {
                return;
            }
            swap(ids, s, i, c);
            i = c;
        }
    }

    private static void swap(int[] ids, float[] s, int a, int b) {
        int t = ids[a];
        ids[a] = ids[b];
        ids[b] = t;
        float f = s[a];
        s[a] = s[b];
        s[b] = f;
    }
}
