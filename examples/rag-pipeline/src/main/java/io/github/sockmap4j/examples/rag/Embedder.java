package io.github.sockmap4j.examples.rag;

import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Deterministic text embeddings without a model: each token maps to a fixed pseudo-random
 * Gaussian vector (seeded by the token's hash), a text is the normalised sum of its tokens'
 * vectors. Texts sharing words get a high cosine similarity, unrelated texts one near zero, and
 * every process computes the same vector for the same text.
 */
public final class Embedder {
    private final int dim;
    private final ConcurrentHashMap<String, float[]> tokens = new ConcurrentHashMap<>();

    public Embedder(int dim) {
        if (dim <= 0) {
            throw new IllegalArgumentException("dimension must be positive: " + dim);
        }
        this.dim = dim;
    }

    public int dim() {
        return dim;
    }

    /** The unit vector of {@code text}; all zeros when it has no token. */
    public float[] embed(String text) {
        float[] v = new float[dim];
        for (String t : text.toLowerCase(Locale.ROOT).split("[^\\p{L}\\p{Nd}]+")) {
            if (!t.isEmpty()) {
                float[] tv = tokens.computeIfAbsent(t, this::tokenVector);
                for (int i = 0; i < dim; i++) {
                    v[i] += tv[i];
                }
            }
        }
        normalize(v);
        return v;
    }

    private float[] tokenVector(String token) {
        long h = 0xcbf29ce484222325L; // FNV-1a over the UTF-16 units
        for (int i = 0; i < token.length(); i++) {
            h = (h ^ token.charAt(i)) * 0x100000001b3L;
        }
        SplittableRandom r = new SplittableRandom(h);
        float[] v = new float[dim];
        for (int i = 0; i < dim; i++) {
            v[i] = (float) r.nextGaussian();
        }
        return v;
    }

    static void normalize(float[] v) {
        double s = 0;
        for (float x : v) {
            s += (double) x * x;
        }
        if (s > 0) {
            float inv = (float) (1 / Math.sqrt(s));
            for (int i = 0; i < v.length; i++) {
                v[i] *= inv;
            }
        }
    }
}
