package io.github.sockmap4j.bench;

import java.util.Arrays;

/** The median of per-round figures, which every benchmark here reports. */
final class Medians {
    private Medians() {
    }

    static double of(double[] v) {
        double[] s = v.clone();
        Arrays.sort(s);
        int n = s.length;
        return n % 2 == 1 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    }

    static double of(long[] v) {
        return of(Arrays.stream(v).asDoubleStream().toArray());
    }
}
