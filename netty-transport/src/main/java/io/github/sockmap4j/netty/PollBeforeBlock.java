package io.github.sockmap4j.netty;

import io.netty.channel.IoHandle;
import io.netty.channel.IoHandler;
import io.netty.channel.IoHandlerContext;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.IoRegistration;
import io.netty.util.concurrent.ThreadAwareExecutor;
import java.util.concurrent.atomic.LongAdder;

/**
 * An event loop's I/O that polls for a short while before it sleeps. Where it would block, the
 * loop first asks its handler for ready events without blocking, again and again, for the window
 * its {@link PollWindow} has learnt, yielding the CPU between two polls; it blocks only when the
 * window ends with nothing ready. A reply that comes within the window then costs no wake-up of
 * this thread: no futex or eventfd write by the waker, no trip through the scheduler, no idle
 * CPU woken (the dearest part in a VM). Tasks handed to the loop while it polls end the poll at
 * once ({@link IoHandlerContext#canBlock()} turns false), so nothing waits for the window.
 *
 * <p>On one CPU the window is 0: a poll there could only delay the peer it waits for. Between
 * two polls the thread yields, so a thread that is ready on the same CPU runs first; and while
 * tasks wait for the CPUs ({@link CpuRoom}) the loop does not poll at all.
 */
final class PollBeforeBlock implements IoHandler {
    private final IoHandler delegate;
    private final PollWindow window;
    private final CpuRoom room;
    private final Context whilePolling = new Context(true);
    private final Context whileBlocking = new Context(false);

    PollBeforeBlock(IoHandler delegate, PollWindow window, CpuRoom room) {
        this.delegate = delegate;
        this.window = window;
        this.room = room;
    }

    /**
     * Handlers of {@code inner} that poll for up to {@code maxPollNanos} before they block; the
     * factory itself where that is 0 or this JVM has one CPU.
     */
    static IoHandlerFactory factory(IoHandlerFactory inner, long maxPollNanos) {
        return factory(inner, maxPollNanos, null);
    }

    /** As {@link #factory(IoHandlerFactory, long)}, asking {@code room} (null: the JVM's) before each poll. */
    static IoHandlerFactory factory(IoHandlerFactory inner, long maxPollNanos, CpuRoom room) {
        if (maxPollNanos <= 0 || Runtime.getRuntime().availableProcessors() < 2) {
            return inner;
        }
        return new Factory(inner, maxPollNanos, room);
    }

    /** Whether loops of {@code factory} poll before they sleep. */
    static boolean polls(IoHandlerFactory factory) {
        return factory instanceof Factory;
    }

    private record Factory(IoHandlerFactory inner, long maxPollNanos, CpuRoom room) implements IoHandlerFactory {
        @Override
        public IoHandler newHandler(ThreadAwareExecutor executor) {
            return new PollBeforeBlock(inner.newHandler(executor),
                    new PollWindow(maxPollNanos, Math.min(maxPollNanos, START_NANOS)), room != null ? room : CpuRoom.shared());
        }

        @Override
        public boolean isChangingThreadSupported() {
            return inner.isChangingThreadSupported();
        }
    }

    /** The first window after a short block. */
    static final long START_NANOS = 5_000;

    /** Polls that found work, and blocks, of every polling loop in this JVM: what tests and metrics read. */
    static final LongAdder POLL_HITS = new LongAdder();
    static final LongAdder BLOCKS = new LongAdder();
    /** Polls left out because tasks were waiting for the CPUs ({@link CpuRoom}). */
    static final LongAdder BUSY_SKIPS = new LongAdder();

    @Override
    public int run(IoHandlerContext context) {
        if (!context.canBlock()) {
            return delegate.run(context);
        }
        long begin = System.nanoTime();
        long pollFor = window.nanos();
        if (pollFor > 0 && !room.hasRoom()) {
            BUSY_SKIPS.increment();
            pollFor = 0;
        }
        if (pollFor > 0) {
            whilePolling.outer = context;
            long end = begin + pollFor;
            do {
                int handled = delegate.run(whilePolling);
                if (handled > 0 || !context.canBlock()) {
                    POLL_HITS.increment();
                    return handled;
                }
                Thread.yield();
            } while (System.nanoTime() - end < 0);
        }
        whileBlocking.outer = context;
        whileBlocking.workNanos = 0;
        int handled = delegate.run(whileBlocking);
        window.blocked(System.nanoTime() - begin - whileBlocking.workNanos);
        BLOCKS.increment();
        return handled;
    }

    @Override
    public void initialize() {
        delegate.initialize();
    }

    @Override
    public void prepareToDestroy() {
        delegate.prepareToDestroy();
    }

    @Override
    public void destroy() {
        delegate.destroy();
    }

    @Override
    public IoRegistration register(IoHandle handle) throws Exception {
        return delegate.register(handle);
    }

    @Override
    public void wakeup() {
        delegate.wakeup();
    }

    @Override
    public boolean isCompatible(Class<? extends IoHandle> handleType) {
        return delegate.isCompatible(handleType);
    }

    /**
     * The loop's context as the handler sees it: while polling, saying that it may not block
     * (the handler then asks epoll without waiting and returns); while blocking, the loop's own
     * answer, with the handler asked how long it worked after it woke.
     */
    private static final class Context implements IoHandlerContext {
        private final boolean polling;
        IoHandlerContext outer;
        long workNanos;

        Context(boolean polling) {
            this.polling = polling;
        }

        @Override
        public boolean canBlock() {
            return !polling && outer.canBlock();
        }

        @Override
        public long delayNanos(long currentTimeNanos) {
            return outer.delayNanos(currentTimeNanos);
        }

        @Override
        public long deadlineNanos() {
            return outer.deadlineNanos();
        }

        @Override
        public boolean shouldReportActiveIoTime() {
            return !polling || outer.shouldReportActiveIoTime();
        }

        @Override
        public void reportActiveIoTime(long activeNanos) {
            workNanos += activeNanos;
            if (outer.shouldReportActiveIoTime()) {
                outer.reportActiveIoTime(activeNanos);
            }
        }
    }
}
