package io.github.sockmap4j.netty.grpc;

import io.github.sockmap4j.colocated.grpc.ReadLoop;
import io.netty.channel.EventLoop;
import io.netty.channel.IoEvent;
import io.netty.channel.IoEventLoop;
import io.netty.channel.IoRegistration;
import io.netty.channel.epoll.EpollIoHandle;
import io.netty.channel.epoll.EpollIoOps;
import io.netty.channel.unix.FileDescriptor;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;

/**
 * A Netty epoll event loop as a co-located connection's reader: the connection's bell joins the
 * loop's epoll set (edge-triggered, as the loop's own wake-up eventfd does), so a reply on the
 * rings is read where a reply on the socket would have been, by the thread that serves the call.
 */
final class EpollReadLoop implements ReadLoop {
    private final IoEventLoop loop;

    private EpollReadLoop(IoEventLoop loop) {
        this.loop = loop;
    }

    /** {@code loop} as a reader, or null where it is not an epoll loop (NIO, io_uring: a thread reads). */
    static ReadLoop of(EventLoop loop) {
        return loop instanceof IoEventLoop l && l.isCompatible(Bell.class) ? new EpollReadLoop(l) : null;
    }

    @Override
    public boolean inLoop() {
        return loop.inEventLoop();
    }

    @Override
    public void execute(Runnable task) {
        loop.execute(task);
    }

    @Override
    public void schedule(Runnable task, long delayNanos) {
        if (!loop.isShuttingDown()) {
            loop.schedule(task, delayNanos, TimeUnit.NANOSECONDS);
        }
    }

    @Override
    public CompletionStage<Watch> watch(int fd, Runnable readable, Runnable gone) {
        CompletableFuture<Watch> watched = new CompletableFuture<>();
        Bell bell = new Bell(new FileDescriptor(fd), readable, gone);
        loop.register(bell).addListener(f -> {
            if (!f.isSuccess()) {
                watched.completeExceptionally(f.cause());
                return;
            }
            IoRegistration r = (IoRegistration) f.getNow();
            try {
                r.submit(EpollIoOps.EPOLLIN.with(EpollIoOps.EPOLLET));
            } catch (Exception e) {
                bell.cancelled = true;
                r.cancel();
                watched.completeExceptionally(e);
                return;
            }
            watched.complete(() -> {
                bell.cancelled = true;
                CompletableFuture<Void> out = new CompletableFuture<>();
                if (loop.inEventLoop()) {
                    r.cancel(); // takes the bell out of the set on the loop, now
                    out.complete(null);
                    return out;
                }
                try {
                    loop.execute(() -> {
                        r.cancel();
                        out.complete(null);
                    });
                } catch (java.util.concurrent.RejectedExecutionException ended) {
                    out.complete(null); // the loop ended: it took its registrations out as it did
                }
                return out;
            });
        });
        return watched;
    }

    /** The bell in the loop's set: each raise runs the connection's pass. */
    private static final class Bell implements EpollIoHandle {
        private final FileDescriptor fd;
        private final Runnable readable;
        private final Runnable gone;
        private volatile boolean cancelled;

        Bell(FileDescriptor fd, Runnable readable, Runnable gone) {
            this.fd = fd;
            this.readable = readable;
            this.gone = gone;
        }

        @Override
        public FileDescriptor fd() {
            return fd;
        }

        @Override
        public void handle(IoRegistration registration, IoEvent event) {
            readable.run();
        }

        /** The loop let go of it: cancelled here, or the loop shut down with it still in its set. */
        @Override
        public void close() {
            if (!cancelled) {
                cancelled = true;
                gone.run();
            }
        }
    }
}
