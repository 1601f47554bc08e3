package io.github.sockmap4j.colocated.grpc;

import com.google.common.util.concurrent.ListenableFuture;
import io.grpc.Attributes;
import io.grpc.Compressor;
import io.grpc.Decompressor;
import io.grpc.Grpc;
import io.grpc.InternalChannelz.SocketStats;
import io.grpc.InternalLogId;
import io.grpc.Metadata;
import io.grpc.ServerStreamTracer;
import io.grpc.Status;
import io.grpc.internal.ObjectPool;
import io.grpc.internal.ServerStream;
import io.grpc.internal.ServerStreamListener;
import io.grpc.internal.ServerTransport;
import io.grpc.internal.ServerTransportListener;
import io.grpc.internal.StatsTraceContext;
import io.grpc.internal.StreamListener;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledExecutorService;

/** The server end of a co-located connection: streams the client opens, served by a gRPC server. */
final class ColocatedServerTransport extends FrameDispatch implements ServerTransport {
    /** Streams one connection may have open; an OPEN past them is refused. */
    static final int MAX_STREAMS = 1000;

    private final ColocatedAddress address;
    private final List<? extends ServerStreamTracer.Factory> tracers;
    private final ObjectPool<ScheduledExecutorService> schedulerPool;
    private final ScheduledExecutorService scheduler;
    private final int maxInboundMessage;
    private final InternalLogId logId;
    private final Map<Integer, ServerStreamImpl> streams = new ConcurrentHashMap<>();
    private final Object lock = new Object();
    private ServerTransportListener listener;
    private Attributes attributes;
    private boolean shutdown;
    private boolean terminated;
    private int lastId;

    private final Attributes given;

    ColocatedServerTransport(ColocatedConnection connection, ColocatedAddress address,
                             List<? extends ServerStreamTracer.Factory> tracers,
                             ObjectPool<ScheduledExecutorService> schedulerPool, int maxInboundMessage,
                             int maxInboundMetadata) {
        this(connection, address, tracers, schedulerPool, maxInboundMessage, maxInboundMetadata, Attributes.EMPTY);
    }

    /** With {@code given} attributes (the agreement's: its TCP connection's addresses) over the defaults. */
    ColocatedServerTransport(ColocatedConnection connection, ColocatedAddress address,
                             List<? extends ServerStreamTracer.Factory> tracers,
                             ObjectPool<ScheduledExecutorService> schedulerPool, int maxInboundMessage,
                             int maxInboundMetadata, Attributes given) {
        super(connection, maxInboundMetadata);
        this.given = given;
        this.address = address;
        this.tracers = tracers;
        this.schedulerPool = schedulerPool;
        this.scheduler = schedulerPool.getObject();
        this.maxInboundMessage = maxInboundMessage;
        this.logId = InternalLogId.allocate(getClass(), address.toString());
    }

    void start(ServerTransportListener l) {
        this.listener = l;
        Attributes.Builder a = given.toBuilder();
        if (given.get(Grpc.TRANSPORT_ATTR_REMOTE_ADDR) == null) {
            a.set(Grpc.TRANSPORT_ATTR_REMOTE_ADDR, address).set(Grpc.TRANSPORT_ATTR_LOCAL_ADDR, address);
        }
        this.attributes = l.transportReady(a.build());
        connection.start(this);
    }

    @Override
    StreamFlow flowOf(int id) {
        ServerStreamImpl s = streams.get(id);
        return s == null ? null : s.flow;
    }

    @Override
    void cancelled(int id, Status status) {
        ServerStreamImpl s = streams.get(id);
        if (s != null) {
            s.closedWith(status);
        }
    }

    @Override
    boolean onOwnFrame(int kind, int id, Frames.Reader f) throws Exception {
        switch (kind) {
            case Frames.OPEN -> {
                String method = f.getString("method", 1024);
                String authority = f.getString("authority", 1024);
                Metadata headers = f.getMetadata("headers", maxInboundMetadata);
                f.end("OPEN");
                open(id, method, authority, headers);
            }
            case Frames.HALF_CLOSE -> {
                f.end("HALF_CLOSE");
                ServerStreamImpl s = streams.get(id);
                if (s != null) {
                    s.flow.endAfterInbox();
                }
            }
            default -> {
                return false;
            }
        }
        return true;
    }

    private void open(int id, String method, String authority, Metadata headers) throws Frames.ProtocolException {
        if (method == null) {
            throw new Frames.ProtocolException("an OPEN without a method");
        }
        synchronized (lock) {
            if (id <= lastId) {
                throw new Frames.ProtocolException("stream " + id + " opened after stream " + lastId);
            }
            lastId = id;
            if (shutdown || streams.size() >= MAX_STREAMS) {
                Status refused = shutdown ? Status.UNAVAILABLE.withDescription("the server is shutting down")
                        : Status.RESOURCE_EXHAUSTED.withDescription("more than " + MAX_STREAMS
                        + " streams open on one co-located connection");
                connection.write(Frames.CANCEL, new Frames.Writer(id).putInt(refused.getCode().value())
                        .putString(refused.getDescription()).bytes());
                return;
            }
        }
        ServerStreamImpl s = new ServerStreamImpl(id, method, authority, headers);
        streams.put(id, s);
        listener.streamCreated(s, method, headers);
        s.flow.readyOnStart();
    }

    @Override
    public void onClosed(Status status) {
        Status failed = status.isOk() ? Status.UNAVAILABLE.withDescription("co-located connection closed") : status;
        for (ServerStreamImpl s : new ArrayList<>(streams.values())) {
            s.closedWith(failed);
        }
        synchronized (lock) {
            if (terminated) {
                return;
            }
            terminated = true;
        }
        schedulerPool.returnObject(scheduler);
        listener.transportTerminated();
    }

    /**
     * Tells the client to open no more streams; those it opened before it heard are served, and the
     * client closes the connection after its last (it drains as well). Nothing is refused here: a
     * stream already on its way would fail where over HTTP/2 it would have been retried.
     */
    @Override
    void goAway(Status reason) {
        connection.write(Frames.GOAWAY, new Frames.Writer(0).bytes());
    }

    @Override
    ScheduledExecutorService timer() {
        return scheduler;
    }

    @Override
    public void shutdown() {
        boolean empty;
        synchronized (lock) {
            if (shutdown) {
                return;
            }
            shutdown = true;
            empty = streams.isEmpty();
        }
        connection.write(Frames.GOAWAY, new Frames.Writer(0).bytes());
        if (empty) {
            connection.close(Status.OK);
        }
    }

    @Override
    public void shutdownNow(Status reason) {
        shutdown();
        for (ServerStreamImpl s : new ArrayList<>(streams.values())) {
            s.cancel(reason);
        }
        connection.close(reason);
    }

    private void streamDone(ServerStreamImpl s) {
        boolean last;
        synchronized (lock) {
            if (streams.remove(s.flow.id) == null) {
                return;
            }
            last = shutdown && streams.isEmpty();
        }
        if (last) {
            connection.close(Status.OK);
        }
    }

    @Override
    public ScheduledExecutorService getScheduledExecutorService() {
        return scheduler;
    }

    @Override
    public InternalLogId getLogId() {
        return logId;
    }

    @Override
    public ListenableFuture<SocketStats> getStats() {
        return noStats();
    }

    final class ServerStreamImpl implements ServerStream {
        final StreamFlow flow;
        private final String authority;
        private final StatsTraceContext stats;
        private volatile ServerStreamListener streamListener;

        ServerStreamImpl(int id, String method, String authority, Metadata headers) {
            this.authority = authority;
            this.stats = StatsTraceContext.newServerContext(tracers, method, headers);
            this.flow = new StreamFlow(id, connection, maxInboundMessage) {
                @Override
                StreamListener listener() {
                    return streamListener;
                }

                @Override
                void deliverEnd() {
                    streamListener.halfClosed();
                }
            };
        }

        @Override
        public void setListener(ServerStreamListener l) {
            this.streamListener = l;
        }

        @Override
        public void request(int numMessages) {
            flow.request(numMessages);
        }

        @Override
        public void writeHeaders(Metadata headers, boolean flush) {
            byte[] h = new Frames.Writer(flow.id).putMetadata(headers).bytes();
            // gRPC flushes headers where no one message and trailers follow at once
            if (flush) {
                connection.write(Frames.HEADERS, h);
            } else {
                connection.writeQuiet(Frames.HEADERS, h);
            }
        }

        @Override
        public void writeMessage(InputStream message) {
            if (!flow.writeMessage(message, stats)) {
                cancel(Status.INTERNAL.withDescription("reading the message failed"));
            }
        }

        @Override
        public void close(Status status, Metadata trailers) {
            byte[] t = new Frames.Writer(flow.id).putInt(status.getCode().value()).putString(status.getDescription())
                    .putMetadata(trailers).bytes();
            if (t.length > connection.maxFrame()) {
                Status s = Status.RESOURCE_EXHAUSTED.withDescription("trailers of " + t.length + " bytes");
                t = new Frames.Writer(flow.id).putInt(s.getCode().value()).putString(s.getDescription())
                        .putMetadata(new Metadata()).bytes();
            }
            flow.sendAfterMessages(Frames.TRAILERS, t, () -> {
                if (flow.finish()) {
                    stats.streamClosed(status);
                    flow.callbacks.execute(() -> streamListener.closed(Status.OK));
                    streamDone(this);
                }
            });
        }

        @Override
        public void cancel(Status status) {
            if (flow.isDone()) {
                return;
            }
            connection.write(Frames.CANCEL, new Frames.Writer(flow.id).putInt(Status.Code.CANCELLED.value())
                    .putString("server cancelled stream").bytes());
            closedWith(status);
        }

        void closedWith(Status status) {
            if (!flow.finish()) {
                return;
            }
            stats.streamClosed(status);
            flow.callbacks.execute(() -> streamListener.closed(status));
            streamDone(this);
        }

        @Override
        public void flush() {
            connection.flush();
        }

        @Override
        public boolean isReady() {
            return flow.isReady();
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
        public void setDecompressor(Decompressor decompressor) {
        }

        @Override
        public Attributes getAttributes() {
            return attributes;
        }

        @Override
        public String getAuthority() {
            return authority;
        }

        @Override
        public StatsTraceContext statsTraceContext() {
            return stats;
        }

        @Override
        public int streamId() {
            return flow.id;
        }

        @Override
        public void setOnReadyThreshold(int numBytes) {
        }
    }
}
