package io.github.sockmap4j.examples.rag;

import java.util.SplittableRandom;

/**
 * A synthetic document collection and question stream, the same for a given seed in every
 * process: documents are chunks about one of {@link #TOPICS} topics (mostly that topic's words,
 * some shared words), questions ask about one topic, so a question's nearest chunks are its
 * topic's.
 */
public final class Corpus {
    static final String[][] TOPICS = {
        {"kernel", "sockmap", "redirect", "verdict", "sockhash", "ingress", "bpf", "program"},
        {"vector", "embedding", "cosine", "index", "nearest", "neighbour", "dimension", "score"},
        {"grpc", "netty", "channel", "pipeline", "stream", "deadline", "metadata", "unary"},
        {"arrow", "batch", "column", "buffer", "schema", "dictionary", "validity", "offset"},
        {"kubernetes", "pod", "node", "daemonset", "cgroup", "namespace", "service", "mesh"},
        {"latency", "percentile", "histogram", "tail", "jitter", "throughput", "queue", "median"},
        {"garbage", "collector", "heap", "allocation", "pause", "region", "young", "tenured"},
        {"retrieval", "context", "prompt", "rerank", "chunk", "threshold", "answer", "relevance"},
        {"tcp", "window", "congestion", "segment", "loopback", "handshake", "socket", "backlog"},
        {"xdp", "packet", "driver", "drop", "filter", "interface", "frame", "counter"},
        {"memory", "cache", "page", "numa", "bandwidth", "copy", "mmap", "huge"},
        {"thread", "scheduler", "wakeup", "cpu", "affinity", "epoll", "futex", "spin"},
    };
    static final String[] COMMON = {
        "the", "a", "of", "and", "how", "does", "when", "why", "with", "system", "fast", "slow",
        "data", "time", "path", "request", "work", "same", "host", "every",
    };

    private Corpus() {
    }

    /** Document {@code id}'s chunk: about topic {@code id % TOPICS.length}. */
    public static String chunk(long seed, int id) {
        SplittableRandom r = new SplittableRandom(seed * 1_000_003L + id);
        String[] topic = TOPICS[id % TOPICS.length];
        StringBuilder sb = new StringBuilder(256);
        sb.append("chunk ").append(id).append(':');
        int words = 24 + r.nextInt(16);
        for (int i = 0; i < words; i++) {
            int pick = r.nextInt(10);
            String w = pick < 6 ? topic[r.nextInt(topic.length)]
                    : pick < 9 ? COMMON[r.nextInt(COMMON.length)]
                    : TOPICS[r.nextInt(TOPICS.length)][r.nextInt(8)];
            sb.append(' ').append(w);
        }
        return sb.toString();
    }

    /**
     * Chunks 0..n-1 as search candidates with the given scores (their vectors from
     * {@code embedder}): what the context stage gets, for its warm-up and for tests.
     */
    public static ArrowMessages.Candidates candidates(long seed, Embedder embedder, float[] scores) {
        int n = scores.length;
        int[] ids = new int[n];
        float[][] vectors = new float[n][];
        String[] chunks = new String[n];
        for (int i = 0; i < n; i++) {
            ids[i] = i;
            chunks[i] = chunk(seed, i);
            vectors[i] = embedder.embed(chunks[i]);
        }
        return new ArrowMessages.Candidates("q", ids, scores.clone(), vectors, chunks);
    }

    /** Question {@code n} of the stream: about topic {@code n % TOPICS.length}. */
    public static String question(long seed, long n) {
        SplittableRandom r = new SplittableRandom(~seed * 31 + n);
        String[] topic = TOPICS[(int) (n % TOPICS.length)];
        StringBuilder sb = new StringBuilder("how does");
        int words = 4 + r.nextInt(4);
        for (int i = 0; i < words; i++) {
            sb.append(' ').append(r.nextInt(5) < 4 ? topic[r.nextInt(topic.length)] : COMMON[r.nextInt(COMMON.length)]);
        }
        return sb.append('?').toString();
    }
}
