/** sockmap4j benchmarks: RTT of java.nio TCP vs the fast path, ratios from one run. */
module io.github.sockmap4j.bench {
    requires transitive io.github.sockmap4j.core;
    requires HdrHistogram;

    exports io.github.sockmap4j.bench;
}
