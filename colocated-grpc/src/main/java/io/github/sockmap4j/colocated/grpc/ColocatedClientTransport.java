package io.github.sockmap4j.colocated.grpc;

import com.google.common.util.concurrent.ListenableFuture;
import io.grpc.Attributes;
import io.grpc.CallOptions;
import io.grpc.ClientStreamTracer;
import io.grpc.Compressor;
import io.grpc.Deadline;
import io.grpc.DecompressorRegistry;
import io.grpc.Grpc;
import io.grpc.InternalChannelz.SocketStats;
import io.grpc.InternalLogId;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.SecurityLevel;
import io.grpc.Status;
import io.grpc.internal.ClientStream;
import io.grpc.internal.ClientStreamListener;
import io.grpc.internal.ClientStreamListener.RpcProgress;
import io.grpc.internal.ConnectionClientTransport;
import io.grpc.internal.GrpcAttributes;
import io.grpc.internal.GrpcUtil;
import io.grpc.internal.InUseStateAggregator;
import io.grpc.internal.InsightBuilder;
import io.grpc.internal.KeepAliveManager;
import io.grpc.internal.NoopClientStream;
import io.grpc.internal.SimpleDisconnectError;
import io.grpc.internal.StatsTraceContext;
import io.grpc.internal.StreamListener;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/** The client end of a co-located connection: streams it opens, frames it reads for them. */
final class ColocatedClientTransport extends FrameDispatch implements ConnectionClientTransport {
    /** How long a blocking caller reads its own reply ({@link ColocatedGrpc#CALLER_READS_MICROS}), as this connection starts. */
    private final long callerReadsNanos = TimeUnit.MICROSECONDS.toNanos(Math.max(0,
            Long.getLong(ColocatedGrpc.CALLER_READS_MICROS, 20_000)));
    private final ColocatedAddress address;
    private final String authority;
    private final String userAgent;
    private final int maxInboundMessage;
    private final InternalLogId logId;
    private final Map<Integer, ClientStreamImpl> streams = new ConcurrentHashMap<>();
    private final AtomicInteger nextId = new AtomicInteger(1);
    private final Map<Long, PingWaiter> pings = new ConcurrentHashMap<>();
    private final AtomicLong nextPing = new AtomicLong();
    private final Object lock = new Object();
    private final Object openLock = new Object();
    private Attributes attributes;
    private Listener listener;
    private Status shutdownStatus;
    private boolean terminated;
    private volatile KeepAliveManager keepAlive; // null: none asked for
    private final ScheduledExecutorService timer;
    private volatile Runnable onGoAway; // null: a GOAWAY shuts this transport down
    private final InUseStateAggregator<ClientStreamImpl> inUse = new InUseStateAggregator<>() {
        @Override
        protected void handleInUse() {
            listener.transportInUse(true);
            KeepAliveManager k = keepAlive;
            if (k != null) {
                k.onTransportActive();
            }
        }

        @Override
        protected void handleNotInUse() {
            listener.transportInUse(false);
            KeepAliveManager k = keepAlive;
            if (k != null) {
                k.onTransportIdle();
            }
        }
    };

    private record PingWaiter(PingCallback callback, Executor executor, long sentNanos) {
    }

    ColocatedClientTransport(ColocatedConnection connection, ColocatedAddress address, String authority,
                             String userAgent, int maxInboundMessage, int maxInboundMetadata, Attributes eagAttrs,
                             ScheduledExecutorService timer) {
        super(connection, maxInboundMetadata);
        this.timer = timer;
        this.address = address;
        this.authority = authority;
        this.userAgent = GrpcUtil.getGrpcUserAgent("sockmap4j-colocated", userAgent);
        this.maxInboundMessage = maxInboundMessage;
        this.logId = InternalLogId.allocate(getClass(), address.toString());
        this.attributes = Attributes.newBuilder()
                .set(GrpcAttributes.ATTR_SECURITY_LEVEL, SecurityLevel.NONE)
                .set(GrpcAttributes.ATTR_CLIENT_EAG_ATTRS, eagAttrs)
                .set(Grpc.TRANSPORT_ATTR_REMOTE_ADDR, address)
                .set(Grpc.TRANSPORT_ATTR_LOCAL_ADDR, address)
                .build();
    }

    /**
     * Pings the server after {@code timeNanos} without an answer (gRPC's {@link KeepAliveManager},
     * as its Netty transport does), and ends this connection where none comes within
     * {@code timeoutNanos}; before {@link #start}.
     */
    void keepAlive(long timeNanos, long timeoutNanos, boolean withoutCalls) {
        keepAlive = new KeepAliveManager(new KeepAlivePings(this, timeoutNanos), timer, timeNanos, timeoutNanos,
                withoutCalls);
    }

    @Override
    public Runnable start(Listener l) {
        synchronized (lock) {
            this.listener = l;
        }
        Status ended = connection.closedStatus();
        if (ended != null) {
            return () -> onClosed(ended);
        }
        attributes = l.filterTransport(attributes);
        // ready first, then read: a peer's first frame may end the connection, which must follow the ready
        return () -> {
            l.transportReady();
            connection.start(this);
            KeepAliveManager k = keepAlive;
            if (k != null) {
                k.onTransportStarted();
            }
        };
    }

    @Override
    public ClientStream newStream(MethodDescriptor<?, ?> method, Metadata headers, CallOptions callOptions,
                                  ClientStreamTracer[] tracers) {
        StatsTraceContext stats = StatsTraceContext.newClientContext(tracers, getAttributes(), headers);
        Status refused;
        synchronized (lock) {
            refused = shutdownStatus;
        }
        Status ended = connection.closedStatus();
        if (refused != null || ended != null) {
            Status s = refused != null ? refused : ended;
            return new NoopClientStream() {
                @Override
                public void start(ClientStreamListener l) {
                    stats.clientOutboundHeaders();
                    stats.streamClosed(s);
                    l.closed(s, RpcProgress.REFUSED, new Metadata());
                }
            };
        }
        headers.discardAll(GrpcUtil.USER_AGENT_KEY);
        headers.put(GrpcUtil.USER_AGENT_KEY, userAgent);
        return new ClientStreamImpl(method, headers, callOptions, stats);
    }

    @Override
    public void ping(PingCallback callback, Executor executor) {
        long data = nextPing.incrementAndGet();
        pings.put(data, new PingWaiter(callback, executor, System.nanoTime()));
        if (!connection.write(Frames.PING, new Frames.Writer(0).putLong(data).bytes())) {
            PingWaiter w = pings.remove(data);
            if (w != null) {
                executor.execute(() -> callback.onFailure(Status.UNAVAILABLE.withDescription("connection closed")));
            }
        }
    }

    @Override
    public void shutdown(Status reason) {
        boolean idle;
        // the listener hears of it under the lock, so that a close on the reader cannot put its
        // transportTerminated before this transportShutdown
        synchronized (lock) {
            if (shutdownStatus != null) {
                return;
            }
            shutdownStatus = reason;
            listener.transportShutdown(reason, SimpleDisconnectError.SUBCHANNEL_SHUTDOWN);
            idle = streams.isEmpty();
        }
        if (idle) {
            connection.close(Status.OK);
        }
    }

    @Override
    public void shutdownNow(Status reason) {
        shutdown(reason);
        for (ClientStreamImpl s : new ArrayList<>(streams.values())) {
            s.cancel(reason);
        }
        connection.close(reason);
    }

    @Override
    public void onClosed(Status status) {
        KeepAliveManager pinging = keepAlive;
        if (pinging != null) {
            pinging.onTransportTermination();
        }
        List<ClientStreamImpl> open = new ArrayList<>(streams.values());
        Status failed = status.isOk() ? Status.UNAVAILABLE.withDescription("co-located connection "
                + connection.name() + " closed") : status;
        for (ClientStreamImpl s : open) {
            s.transportFailed(failed);
        }
        for (Long k : new ArrayList<>(pings.keySet())) {
            PingWaiter w = pings.remove(k);
            if (w != null) {
                w.executor().execute(() -> w.callback().onFailure(failed));
            }
        }
        synchronized (lock) {
            if (shutdownStatus == null) {
                shutdownStatus = failed;
                listener.transportShutdown(failed, SimpleDisconnectError.CONNECTION_RESET);
            }
            if (terminated) {
                return;
            }
            terminated = true;
            listener.transportTerminated();
        }
    }

    @Override
    StreamFlow flowOf(int id) {
        ClientStreamImpl s = streams.get(id);
        return s == null ? null : s.flow;
    }

    @Override
    void cancelled(int id, Status status) {
        ClientStreamImpl s = streams.get(id);
        if (s != null) {
            s.cancelledByServer(status);
        }
    }

    @Override
    boolean onOwnFrame(int kind, int id, Frames.Reader f) throws Exception {
        switch (kind) {
            case Frames.HEADERS -> {
                Metadata h = f.getMetadata("headers", maxInboundMetadata);
                f.end("HEADERS");
                ClientStreamImpl s = streams.get(id);
                if (s != null) {
                    s.headers(h);
                }
            }
            case Frames.TRAILERS -> {
                int code = f.getInt("status code");
                String description = f.getString("status description", maxInboundMetadata);
                Metadata t = f.getMetadata("trailers", maxInboundMetadata);
                f.end("TRAILERS");
                ClientStreamImpl s = streams.get(id);
                if (s != null) {
                    s.trailers(StreamFlow.statusOf(code, description), t);
                }
            }
            case Frames.GOAWAY -> {
                f.end("GOAWAY");
                Runnable r = onGoAway;
                if (r != null) {
                    r.run();
                } else {
                    shutdown(Status.UNAVAILABLE.withDescription("the co-located server is shutting down"));
                }
            }
            default -> {
                return false;
            }
        }
        return true;
    }

    @Override
    void pong(long data) {
        KeepAliveManager k = keepAlive;
        if (k != null) {
            k.onDataReceived(); // an answer: the next ping after the keepalive's time
        }
        PingWaiter w = pings.remove(data);
        if (w != null) {
            long rtt = System.nanoTime() - w.sentNanos();
            w.executor().execute(() -> w.callback().onSuccess(rtt));
        }
    }

    /**
     * Runs {@code r} instead of shutting down when the server says the connection goes away: the
     * owner sends new calls elsewhere first, then drains this transport ({@link #drain}), so that a
     * call it sent here a moment before is not refused.
     */
    void onGoAway(Runnable r) {
        onGoAway = r;
    }

    @Override
    void goAway(Status reason) {
        shutdown(reason);
    }

    @Override
    ScheduledExecutorService timer() {
        return timer;
    }

    private void streamDone(ClientStreamImpl s) {
        boolean last;
        synchronized (lock) {
            if (streams.remove(s.flow.id) == null) {
                return;
            }
            if (GrpcUtil.shouldBeCountedForInUse(s.callOptions)) {
                inUse.updateObjectInUse(s, false);
            }
            last = streams.isEmpty() && shutdownStatus != null;
        }
        if (last) {
            connection.close(Status.OK);
        }
    }

    @Override
    public Attributes getAttributes() {
        return attributes;
    }

    @Override
    public InternalLogId getLogId() {
        return logId;
    }

    @Override
    public ListenableFuture<SocketStats> getStats() {
        return noStats();
    }

    @Override
    public String toString() {
        return "ColocatedClientTransport{" + address + "}";
    }

    final class ClientStreamImpl implements ClientStream {
        volatile StreamFlow flow;
        final CallOptions callOptions;
        private final MethodDescriptor<?, ?> method;
        private final Metadata headers;
        private final StatsTraceContext stats;
        private volatile ClientStreamListener streamListener;
        private String streamAuthority = authority;

        /**
         * The thread that started a call whose caller waits for it (a blocking stub's unary call),
         * which reads the reply itself at the half-close; null for any other call.
         */
        private volatile Thread waitingCaller;

        ClientStreamImpl(MethodDescriptor<?, ?> method, Metadata headers, CallOptions callOptions,
                         StatsTraceContext stats) {
            this.method = method;
            this.headers = headers;
            this.callOptions = callOptions;
            this.stats = stats;
        }

        private StreamFlow newFlow(int id) {
            return new StreamFlow(id, connection, maxInboundMessage) {
                @Override
                StreamListener listener() {
                    return streamListener;
                }

                @Override
                void deliverEnd() {
                    // the end is delivered by trailers(), which waits for the inbox through endAfterInbox
                    Ending e = ending;
                    if (e != null) {
                        finishWith(e.status(), e.trailers());
                    }
                }
            };
        }

        private record Ending(Status status, Metadata trailers) {
        }

        private volatile Ending ending;
        /** Whether gRPC half-closed this stream (a retry's replay may flush from another thread). */
        private volatile boolean halfClosed;

        @Override
        public void start(ClientStreamListener l) {
            this.streamListener = l;
            if (callerReadsNanos > 0 && method.getType() == MethodDescriptor.MethodType.UNARY
                    && BlockingCalls.isBlocking(callOptions)) {
                waitingCaller = Thread.currentThread();
            }
            boolean written;
            // ids go out in the order they are taken: a server refuses an id below one it has seen
            synchronized (openLock) {
                int id = nextId.getAndAdd(1);
                flow = newFlow(id);
                synchronized (lock) {
                    if (shutdownStatus != null) {
                        Status s = shutdownStatus;
                        flow.finish();
                        flow.callbacks.execute(() -> l.closed(s, RpcProgress.REFUSED, new Metadata()));
                        return;
                    }
                    streams.put(id, this);
                    if (GrpcUtil.shouldBeCountedForInUse(callOptions)) {
                        inUse.updateObjectInUse(this, true);
                    }
                }
                stats.clientOutboundHeaders();
                byte[] open = new Frames.Writer(id).putString(method.getFullMethodName()).putString(streamAuthority)
                        .putMetadata(headers).bytes();
                if (open.length > connection.maxFrame()) {
                    transportFailed(Status.RESOURCE_EXHAUSTED.withDescription("request headers of " + open.length
                            + " bytes; at most " + connection.maxFrame()));
                    return;
                }
                // a call whose one message and half-close follow (as gRPC sends a unary request) wakes the server
                // once, at the half-close; any other opens at once
                written = method.getType().clientSendsOneMessage() ? connection.writeQuiet(Frames.OPEN, open)
                        : connection.write(Frames.OPEN, open);
            }
            if (!written) {
                transportFailed(Status.UNAVAILABLE.withDescription("co-located connection " + connection.name()
                        + " closed"));
                return;
            }
            flow.readyOnStart();
        }

        void headers(Metadata h) {
            stats.clientInboundHeaders(h);
            flow.callbacks.execute(() -> streamListener.headersRead(h));
        }

        void trailers(Status status, Metadata t) {
            ending = new Ending(status, t);
            flow.endAfterInbox();
        }

        void cancelledByServer(Status status) {
            finishWith(status, new Metadata());
        }

        void transportFailed(Status status) {
            finishWith(status, new Metadata());
        }

        private void finishWith(Status status, Metadata trailers) {
            if (!flow.finish()) {
                return;
            }
            stats.clientInboundTrailers(trailers);
            stats.streamClosed(status);
            flow.callbacks.execute(() -> streamListener.closed(status, RpcProgress.PROCESSED, trailers));
            streamDone(this);
        }

        @Override
        public void request(int numMessages) {
            StreamFlow f = flow;
            if (f != null) {
                f.request(numMessages);
            }
        }

        @Override
        public void writeMessage(InputStream message) {
            StreamFlow f = flow;
            if (f != null && !f.writeMessage(message, stats)) {
                cancel(Status.INTERNAL.withDescription("reading the message failed"));
            }
        }

        @Override
        public void halfClose() {
            halfClosed = true;
            StreamFlow f = flow;
            if (f != null) {
                f.sendAfterMessages(Frames.HALF_CLOSE, new Frames.Writer(f.id).bytes(), null);
                if (waitingCaller == Thread.currentThread()) {
                    // a blocking stub's caller, which waits for the reply from here on anyway: it reads the
                    // reply itself, and its callbacks wait in its own executor for it to return and run them
                    waitingCaller = null;
                    connection.readOwn(f.id, () -> ending != null || f.isDone(), callerReadsNanos);
                }
            }
        }

        @Override
        public void cancel(Status reason) {
            if (flow == null) {
                ClientStreamListener l = streamListener;
                if (l != null) {
                    l.closed(reason, RpcProgress.PROCESSED, new Metadata());
                }
                return;
            }
            if (flow.isDone()) {
                return;
            }
            // After what the ring holds now, as over HTTP/2 (a cancel is a command its event loop runs
            // after what it read): a call whose callbacks cancel it (a handler's outgoing call, whose
            // context ends once its reply is used) ends as the server ended it if its trailers are there.
            StreamFlow f = flow;
            connection.afterReads(() -> {
                if (f.isDone() || ending != null) {
                    return; // ended, or its end came and is delivered after the messages before it
                }
                connection.write(Frames.CANCEL, new Frames.Writer(f.id).putInt(reason.getCode().value())
                        .putString(reason.getDescription()).bytes());
                finishWith(reason, new Metadata());
            });
        }

        @Override
        public void flush() {
            if (method.getType().clientSendsOneMessage() && !halfClosed) {
                // gRPC's retrying stream flushes after every message, the one message of a call whose
                // half-close follows too: that flush would wake the server for a call it cannot serve
                // before the half-close, which wakes it again. The half-close ends the batch instead,
                // as gRPC's own call does for such a call where it does not retry.
                return;
            }
            connection.flush();
        }

        @Override
        public boolean isReady() {
            StreamFlow f = flow;
            return f != null && f.isReady();
        }

        @Override
        public void optimizeForDirectExecutor() {
        }

        @Override
        public void setCompressor(Compressor compressor) {
        }

        @Override
        public void setMessageCompression(boolean enable) {
        }

        @Override
        public void setAuthority(String a) {
            this.streamAuthority = a;
        }

        @Override
        public void setFullStreamDecompression(boolean fullStreamDecompression) {
        }

        @Override
        public void setDecompressorRegistry(DecompressorRegistry registry) {
        }

        @Override
        public void setMaxInboundMessageSize(int maxSize) {
        }

        @Override
        public void setMaxOutboundMessageSize(int maxSize) {
        }

        @Override
        public void setDeadline(Deadline deadline) {
            headers.discardAll(GrpcUtil.TIMEOUT_KEY);
            headers.put(GrpcUtil.TIMEOUT_KEY, Math.max(0, deadline.timeRemaining(TimeUnit.NANOSECONDS)));
        }

        @Override
        public Attributes getAttributes() {
            return attributes;
        }

        @Override
        public void appendTimeoutInsight(InsightBuilder insight) {
            insight.appendKeyValue("remote_addr", address);
        }
    }
}
