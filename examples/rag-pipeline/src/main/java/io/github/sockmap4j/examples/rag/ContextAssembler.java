package io.github.sockmap4j.examples.rag;

import java.util.Locale;

/**
 * Context assembly: keep the candidates at or above a score threshold, rerank them by maximal
 * marginal relevance (relevant, but not a near-copy of a chunk already chosen), take the top k,
 * and write the prompt the LLM would get.
 */
public final class ContextAssembler {
    private final float threshold;
    private final int topK;
    private final float lambda;

    public ContextAssembler(float threshold, int topK, float lambda) {
        if (topK <= 0) {
            throw new IllegalArgumentException("top-k must be positive: " + topK);
        }
        if (lambda < 0 || lambda > 1) {
            throw new IllegalArgumentException("MMR lambda must be in [0, 1]: " + lambda);
        }
        this.threshold = threshold;
        this.topK = topK;
        this.lambda = lambda;
    }

    /** The chosen candidates' positions in {@code c}, in the order they go into the context. */
    public int[] select(ArrowMessages.Candidates c) {
        int n = c.size();
        boolean[] eligible = new boolean[n];
        int left = 0;
        for (int i = 0; i < n; i++) {
            if (c.scores()[i] >= threshold) {
                eligible[i] = true;
                left++;
            }
        }
        int k = Math.min(topK, left);
        int[] chosen = new int[k];
        float[] maxSim = new float[n]; // each candidate's highest similarity to a chosen one
        java.util.Arrays.fill(maxSim, -1f);
        for (int s = 0; s < k; s++) {
            int best = -1;
            float bestValue = Float.NEGATIVE_INFINITY;
            for (int i = 0; i < n; i++) {
                if (eligible[i]) {
                    float v = lambda * c.scores()[i] - (1 - lambda) * (s == 0 ? 0 : maxSim[i]);
                    if (v > bestValue) {
                        bestValue = v;
                        best = i;
                    }
                }
            }
            chosen[s] = best;
            eligible[best] = false;
            float[] b = c.vectors()[best];
            for (int i = 0; i < n; i++) {
                if (eligible[i]) {
                    maxSim[i] = Math.max(maxSim[i], dot(b, c.vectors()[i]));
                }
            }
        }
        return chosen;
    }

    /** The assembled prompt: the chosen chunks with their ids and scores, then the question. */
    public String assemble(ArrowMessages.Candidates c) {
        int[] chosen = select(c);
        StringBuilder sb = new StringBuilder(512);
        sb.append("Answer from this context (").append(chosen.length).append(" of ").append(c.size())
                .append(" candidates at score >= ").append(String.format(Locale.ROOT, "%.2f", threshold)).append("):\n");
        for (int i = 0; i < chosen.length; i++) {
            int p = chosen[i];
            sb.append(String.format(Locale.ROOT, "[%d] doc %d (%.3f) ", i + 1, c.ids()[p], c.scores()[p]))
                    .append(c.chunks()[p]).append('\n');
        }
        return sb.append("Question: ").append(c.question()).toString();
    }

    static float dot(float[] a, float[] b) {
        float s = 0;
        for (int i = 0; i < a.length; i++) {
            s += a[i] * b[i];
        }
        return s;
    }
}
