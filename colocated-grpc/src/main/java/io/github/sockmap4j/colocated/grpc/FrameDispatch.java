package io.github.sockmap4j.colocated.grpc;

import com.google.common.util.concurrent.ListenableFuture;
import com.google.common.util.concurrent.SettableFuture;
import io.grpc.InternalChannelz.SocketStats;
import io.grpc.Status;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The frames both ends of a connection take alike (a stream's message pieces, its window, a
 * cancel, a ping), handed to the stream's {@link StreamFlow}; each end adds its own kinds.
 */
abstract class FrameDispatch implements ColocatedConnection.Handler {
    /** How often {@link #drain} asks the other end whether it lives. */
    static final long DRAIN_PING_NANOS = TimeUnit.SECONDS.toNanos(1);
    /** The bit that marks {@link #drain}'s pings, whose answers are counted here, not handed to {@link #pong}. */
    private static final long LIVENESS = Long.MIN_VALUE;
    final ColocatedConnection connection;
    final int maxInboundMetadata;
    private final AtomicLong livenessAnswers = new AtomicLong();
    private final AtomicLong livenessSent = new AtomicLong();
    private final java.util.concurrent.atomic.AtomicBoolean draining = new java.util.concurrent.atomic.AtomicBoolean();

    FrameDispatch(ColocatedConnection connection, int maxInboundMetadata) {
        this.connection = connection;
        this.maxInboundMetadata = maxInboundMetadata;
    }

    /** Stream {@code id}'s flow; null where it ended or was never open here (its frames are dropped). */
    abstract StreamFlow flowOf(int id);

    /** The other end cancelled stream {@code id}. */
    abstract void cancelled(int id, Status status);

    /** A frame of a kind only this end takes; false where this end takes no such kind. */
    abstract boolean onOwnFrame(int kind, int id, Frames.Reader f) throws Exception;

    /** The answer to a ping of this end's own ({@code ping}); an end that sends none refuses it. */
    void pong(long data) throws Frames.ProtocolException {
        throw new Frames.ProtocolException("a PONG to no ping");
    }

    /**
     * The connection is going away: the client opens no new streams, the open ones run on, and the
     * client closes the connection after its last.
     */
    abstract void goAway(Status reason);

    /** Where {@link #drain} schedules its pings. */
    abstract ScheduledExecutorService timer();

    /**
     * The connection's TCP lifeline ended: ends this connection as gRPC ends a connection that goes
     * away (a server's maximum connection age or idle time, a graceful shutdown): no new streams,
     * the open ones to their end. The lifeline cannot say whether the other end lives on, so
     * meanwhile it is asked each {@link #DRAIN_PING_NANOS} (a ping its reader answers); the first
     * interval without an answer closes the connection, the open streams failing with
     * {@code reason}, as they would at once over a dropped TCP connection.
     */
    final void drain(Status reason) {
        drain(reason, () -> false);
    }

    /**
     * As {@link #drain(Status)}, and the connection closed at once, its streams failing, at the
     * first ping's turn that finds {@code forced} true (the channel above was shut down now).
     */
    final void drain(Status reason, java.util.function.BooleanSupplier forced) {
        if (!draining.compareAndSet(false, true)) {
            return;
        }
        goAway(reason);
        if (connection.isClosed()) {
            return;
        }
        ScheduledExecutorService timer = timer();
        timer.execute(new Runnable() {
            private long answered = -1;

            @Override
            public void run() {
                if (connection.isClosed()) {
                    return;
                }
                if (forced.getAsBoolean()) {
                    connection.close(Status.UNAVAILABLE.withDescription("the channel was shut down now ("
                            + reason.getDescription() + ")"));
                    return;
                }
                long now = livenessAnswers.get();
                if (now == answered) {
                    connection.close(reason.augmentDescription("and the other end answered no ping within "
                            + TimeUnit.NANOSECONDS.toMillis(DRAIN_PING_NANOS) + " ms"));
                    return;
                }
                answered = now;
                connection.write(Frames.PING, new Frames.Writer(0).putLong(LIVENESS | livenessSent.incrementAndGet()).bytes());
                try {
                    timer.schedule(this, DRAIN_PING_NANOS, TimeUnit.NANOSECONDS);
                } catch (java.util.concurrent.RejectedExecutionException e) {
                    connection.close(reason); // the timer ended: nobody is left to ask
                }
            }
        });
    }

    @Override
    public final void onFrame(int kind, Frames.Reader f) throws Exception {
        int id = f.getInt("stream id");
        switch (kind) {
            case Frames.MESSAGE -> {
                boolean more = f.getByte("flags") == Frames.MORE;
                Frames.Slice bytes = f.restSlice();
                StreamFlow s = flowOf(id);
                if (s != null) {
                    s.messageFrame(more, bytes);
                }
            }
            case Frames.LENT -> {
                Lending lending = connection.lending();
                if (lending == null) {
                    throw new Frames.ProtocolException("a LENT frame on a connection whose ends did not agree on lending");
                }
                long at = f.getLong("place");
                long bytes = f.getLong("body bytes");
                int headBytes = f.getInt("head length");
                if (headBytes < 0 || headBytes > connection.maxFrame()) {
                    throw new Frames.ProtocolException("a LENT frame's head of " + headBytes + " bytes");
                }
                byte[] head = f.getBytes("head", headBytes);
                byte[] tail = f.rest();
                LentIn m = new LentIn(connection, at, lending.peerBody(at, bytes), head, tail);
                StreamFlow s = flowOf(id);
                if (s == null) {
                    m.drop(); // the stream ended here: the body goes back at once
                } else {
                    s.lentFrame(m);
                }
            }
            case Frames.RETURNED -> {
                long at = f.getLong("place");
                long bytes = f.getLong("body bytes");
                f.end("RETURNED");
                Lending lending = connection.lending();
                if (lending == null || id != 0) {
                    throw new Frames.ProtocolException("a RETURNED frame on stream " + id + (lending == null
                            ? " of a connection whose ends did not agree on lending" : ", not the connection's"));
                }
                lending.returned(at, bytes);
            }
            case Frames.WINDOW -> {
                int bytes = f.getInt("window");
                f.end("WINDOW");
                StreamFlow s = flowOf(id);
                if (s != null) {
                    s.windowOpened(bytes);
                }
            }
            case Frames.CANCEL -> {
                int code = f.getInt("status code");
                String description = f.getString("status description", maxInboundMetadata);
                f.end("CANCEL");
                cancelled(id, StreamFlow.statusOf(code, description));
            }
            case Frames.PING -> {
                long data = f.getLong("ping");
                f.end("PING");
                connection.write(Frames.PONG, new Frames.Writer(0).putLong(data).bytes());
            }
            case Frames.PONG -> {
                long data = f.getLong("pong");
                f.end("PONG");
                if ((data & LIVENESS) != 0) {
                    livenessAnswers.incrementAndGet();
                } else {
                    pong(data);
                }
            }
            default -> {
                if (!onOwnFrame(kind, id, f)) {
                    throw new Frames.ProtocolException("a frame of kind " + kind + " this end does not take");
                }
            }
        }
    }

    /** No socket statistics: there is no socket. */
    static ListenableFuture<SocketStats> noStats() {
        SettableFuture<SocketStats> f = SettableFuture.create();
        f.set(null);
        return f;
    }
}
