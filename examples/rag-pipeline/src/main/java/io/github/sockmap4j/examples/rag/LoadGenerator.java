package io.github.sockmap4j.examples.rag;

import com.google.common.util.concurrent.FutureCallback;
import com.google.common.util.concurrent.Futures;
import com.google.common.util.concurrent.MoreExecutors;
import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.stub.ClientCalls;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import org.HdrHistogram.Histogram;

/**
 * Drives questions at the gateway: at a fixed rate (latency counted from each request's
 * scheduled start, so a stall also delays the requests queued behind it), or closed-loop with a
 * fixed number in flight (throughput).
 */
final class LoadGenerator {
    /** What one fixed-rate run measured. */
    record Result(Histogram latencyMicros, long ok, long failed, double seconds, String firstError) {
        double rps() {
            return ok / seconds;
        }
    }

    private final ManagedChannel gateway;
    private final long seed;
    private final AtomicLong questions = new AtomicLong();

    LoadGenerator(ManagedChannel gateway, long seed) {
        this.gateway = gateway;
        this.seed = seed;
    }

    /** One question, answered synchronously: the assembled context. */
    String ask(String question) {
        return new String(ClientCalls.blockingUnaryCall(gateway, RagMethods.ASK,
                CallOptions.DEFAULT.withDeadlineAfter(30, TimeUnit.SECONDS), question.getBytes(StandardCharsets.UTF_8)),
                StandardCharsets.UTF_8);
    }

    /** {@code n} requests at {@code rate} per second; a progress bar labelled {@code label} on {@code progress}. */
    Result fixedRate(int n, double rate, String label, PrintStream progress) throws InterruptedException {
        Histogram h = new Histogram(60_000_000L, 3);
        Histogram recent = new Histogram(60_000_000L, 3); // since the progress bar last drew
        AtomicLong ok = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        String[] firstError = new String[1];
        CountDownLatch done = new CountDownLatch(n);
        Progress bar = progress == null ? null : new Progress(label, n, progress);
        long periodNanos = (long) (1e9 / rate);
        long t0 = System.nanoTime();
        for (int i = 0; i < n; i++) {
            long scheduled = t0 + i * periodNanos;
            long wait;
            while ((wait = scheduled - System.nanoTime()) > 0) {
                LockSupport.parkNanos(wait);
            }
            Futures.addCallback(call(), new FutureCallback<byte[]>() {
                @Override
                public void onSuccess(byte[] reply) {
                    long micros = Math.max(1, (System.nanoTime() - scheduled) / 1000);
                    synchronized (h) {
                        h.recordValue(Math.min(micros, h.getHighestTrackableValue()));
                        recent.recordValue(Math.min(micros, recent.getHighestTrackableValue()));
                    }
                    ok.incrementAndGet();
                    done.countDown();
                }

                @Override
                public void onFailure(Throwable t) {
                    if (failed.getAndIncrement() == 0) {
                        firstError[0] = t.toString();
                    }
                    done.countDown();
                }
            }, MoreExecutors.directExecutor());
            if (bar != null) {
                bar.update(i + 1, h, recent);
            }
        }
        if (!done.await(60, TimeUnit.SECONDS)) {
            failed.addAndGet(done.getCount());
            firstError[0] = firstError[0] != null ? firstError[0] : done.getCount() + " requests unanswered after 60 s";
        }
        double seconds = (System.nanoTime() - t0) / 1e9;
        if (bar != null) {
            bar.finish(h, recent);
        }
        synchronized (h) {
            return new Result(h, ok.get(), failed.get(), seconds, firstError[0]);
        }
    }

    /** How a warm-up ended: its length, whether the medians and the JIT compilers settled, and the last window's median. */
    record WarmUp(double seconds, boolean settled, boolean jitQuiet, double lastP50Millis) {
    }

    /**
     * The most CPU the JIT compilers of all stages together may use in a one-second window of a
     * settled warm-up: 2% of one CPU. Past it, code the measured phase runs is still being
     * compiled, and that phase would pay for it (by the compilers' CPU and by slower code).
     */
    static final long QUIET_JIT_NANOS_PER_WINDOW = 20_000_000L;

    /**
     * Sends at {@code rate} in one-second windows until the median latencies of the last five
     * windows agree within 10% (a median still falling 5% a window does not pass) and the JIT
     * compilers used at most {@link #QUIET_JIT_NANOS_PER_WINDOW} in each of the last three windows
     * (compilations come in bursts a few seconds apart; read from {@code jitSinceLast}, the
     * compilers' CPU time since its previous call, or -1 where unknown), at least
     * {@code minSeconds} and at most {@code maxSeconds}.
     */
    WarmUp warmUp(double rate, double minSeconds, double maxSeconds, java.util.function.LongSupplier jitSinceLast)
            throws InterruptedException {
        return warmUp(rate, minSeconds, maxSeconds, jitSinceLast, true);
    }

    /**
     * As {@link #warmUp(double, double, double, java.util.function.LongSupplier)}, but ending once
     * the JIT compilers are quiet whatever the medians do: between the loads of a curve, after the
     * closed-loop throughput phase has pushed methods past the compilers' thresholds, the
     * compilations it queued land here rather than in the measured slices.
     */
    WarmUp untilJitQuiet(double rate, double maxSeconds, java.util.function.LongSupplier jitSinceLast)
            throws InterruptedException {
        return warmUp(rate, 3, maxSeconds, jitSinceLast, false);
    }

    private WarmUp warmUp(double rate, double minSeconds, double maxSeconds, java.util.function.LongSupplier jitSinceLast,
            boolean untilSettled) throws InterruptedException {
        double[] last = new double[5];
        int windows = 0;
        long t0 = System.nanoTime();
        jitSinceLast.getAsLong(); // from here
        int quietWindows = 0;
        while (true) {
            Result r = fixedRate(Math.max(1, (int) rate), rate, "warm-up", null);
            last[windows++ % last.length] = r.latencyMicros().getTotalCount() == 0 ? Double.NaN
                    : r.latencyMicros().getValueAtPercentile(50) / 1000.0;
            long jit = jitSinceLast.getAsLong();
            quietWindows = jit < 0 || jit <= QUIET_JIT_NANOS_PER_WINDOW * r.seconds() ? quietWindows + 1 : 0;
            boolean jitQuiet = quietWindows >= 3;
            double elapsed = (System.nanoTime() - t0) / 1e9;
            boolean settled = windows >= last.length
                    && Arrays.stream(last).max().orElse(0) <= 1.10 * Arrays.stream(last).min().orElse(0);
            if (elapsed >= maxSeconds || elapsed >= minSeconds && (settled || !untilSettled) && jitQuiet) {
                return new WarmUp(elapsed, settled, jitQuiet, last[(windows - 1) % last.length]);
            }
        }
    }

    /** Requests per second with {@code inFlight} requests outstanding for {@code seconds}. */
    double closedLoop(int inFlight, double seconds) throws InterruptedException {
        Semaphore slots = new Semaphore(inFlight);
        AtomicLong ok = new AtomicLong();
        long end = System.nanoTime() + (long) (seconds * 1e9);
        long t0 = System.nanoTime();
        while (System.nanoTime() < end) {
            if (!slots.tryAcquire(100, TimeUnit.MILLISECONDS)) {
                continue;
            }
            Futures.addCallback(call(), new FutureCallback<byte[]>() {
                @Override
                public void onSuccess(byte[] reply) {
                    ok.incrementAndGet();
                    slots.release();
                }

                @Override
                public void onFailure(Throwable t) {
                    slots.release();
                }
            }, MoreExecutors.directExecutor());
        }
        long counted = ok.get();
        double elapsed = (System.nanoTime() - t0) / 1e9;
        slots.acquire(inFlight); // let the last ones finish before the next phase
        slots.release(inFlight);
        return counted / elapsed;
    }

    private com.google.common.util.concurrent.ListenableFuture<byte[]> call() {
        String q = Corpus.question(seed, questions.getAndIncrement());
        return ClientCalls.futureUnaryCall(gateway.newCall(RagMethods.ASK,
                CallOptions.DEFAULT.withDeadlineAfter(30, TimeUnit.SECONDS)), q.getBytes(StandardCharsets.UTF_8));
    }

    /** A one-line progress bar: redrawn in place on a terminal, a line per quarter otherwise. */
    private static final class Progress {
        private final String label;
        private final int total;
        private final PrintStream out;
        private final boolean terminal = System.console() != null;
        private long lastDraw;
        private int lastQuarter;

        Progress(String label, int total, PrintStream out) {
            this.label = label;
            this.total = total;
            this.out = out;
        }

        void update(int sent, Histogram h, Histogram recent) {
            long now = System.nanoTime();
            if (terminal) {
                if (now - lastDraw > 200_000_000L || sent == total) {
                    lastDraw = now;
                    out.print("\r" + line(sent, h, recent));
                    out.flush();
                }
            } else if (sent * 4 / total > lastQuarter && sent < total) {
                lastQuarter = sent * 4 / total;
                out.println(line(sent, h, recent));
            }
        }

        void finish(Histogram h, Histogram recent) {
            out.print((terminal ? "\r" : "") + line(total, h, recent) + System.lineSeparator());
            out.flush();
        }

        private String line(int sent, Histogram h, Histogram recent) {
            int width = 30;
            int filled = (int) ((long) sent * width / total);
            double p50;
            double p50Recent;
            synchronized (h) {
                p50 = h.getTotalCount() == 0 ? 0 : h.getValueAtPercentile(50) / 1000.0;
                p50Recent = recent.getTotalCount() == 0 ? 0 : recent.getValueAtPercentile(50) / 1000.0;
                recent.reset();
            }
            return String.format(Locale.ROOT, "  %-18s [%s%s] %,6d/%,d sent  p50 %.2f ms (lately %.2f)", label,
                    "#".repeat(filled), ".".repeat(width - filled), sent, total, p50, p50Recent);
        }
    }
}
