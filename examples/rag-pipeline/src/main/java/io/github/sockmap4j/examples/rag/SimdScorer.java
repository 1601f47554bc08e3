package io.github.sockmap4j.examples.rag;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/** Dot products with the Vector API: one fused multiply-add per lane, reduced once per document. */
final class SimdScorer implements VectorIndex.Scorer {
    private static final VectorSpecies<Float> SPECIES = FloatVector.SPECIES_PREFERRED;

    @Override
    public void scores(float[] data, int dim, float[] q, float[] out, int n) {
        int bound = SPECIES.loopBound(dim);
        int lanes = SPECIES.length();
        for (int d = 0, off = 0; d < n; d++, off += dim) {
            FloatVector acc = FloatVector.zero(SPECIES);
            int i = 0;
            for (; i < bound; i += lanes) {
                acc = FloatVector.fromArray(SPECIES, data, off + i).fma(FloatVector.fromArray(SPECIES, q, i), acc);
            }
            float s = acc.reduceLanes(VectorOperators.ADD);
            for (; i < dim; i++) {
                s += data[off + i] * q[i];
            }
            out[d] = s;
        }
    }

    @Override
    public String name() {
        return "SIMD " + SPECIES.vectorBitSize() + "-bit";
    }
}
