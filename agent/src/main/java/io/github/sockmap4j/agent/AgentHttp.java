package io.github.sockmap4j.agent;

import io.github.sockmap4j.admin.SockmapAdmin;
import io.github.sockmap4j.agent.NodeAgent;
import io.github.sockmap4j.linux.bpf.SockKeyLayout;
import io.github.sockmap4j.linux.sys.SockDiag;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerDomainSocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpServerCodec;
import io.netty.handler.codec.http.HttpServerKeepAliveHandler;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.UnixDomainSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The agent's HTTP endpoints: {@code /metrics} (Prometheus text), {@code /healthz} (200 while the
 * agent's control plane lives: pins, watcher, control socket) and {@code /readyz} (200 once pins,
 * watcher, control socket and, when it watches Kubernetes, the first pod list are in place; 503
 * otherwise).
 *
 * <p>Any local user can connect, so no client can hold it: Netty's HTTP codec on one event loop,
 * never blocking on a client; each request (line and headers) whole within
 * {@link #READ_TIMEOUT_SECONDS} of the connection's start or of the last response, a deadline a
 * byte now and then does not move, or the connection closed; at most {@link #MAX_CONNECTIONS}
 * open connections, of which users other than root (asked of the kernel, sock_diag) hold at most
 * all but {@link #ROOT_SLOTS} between them, so the kubelet's probes (root's) always find a slot;
 * a request sent while the answers to the last ones lie unread closes its connection, and a
 * connection whose answers pile up is not read, so no client can make the agent hold more than a
 * response or so each; no request body. A port someone else holds is no reason
 * to stop the control plane: it is tried again every {@link #RETRY_SECONDS} seconds, said once,
 * until it binds.
 *
 * <p>What any user can make the agent compute is bounded too: a scrape of {@code /metrics} is
 * rendered at most once every {@link #SCRAPE_REUSE_MILLIS} ms and the text reused meanwhile (the
 * counters are then up to that old), and the probe socket has an event loop of its own, so that
 * users' requests on the TCP port, scrapes among them, never stand between the kubelet's probe
 * and its answer. Before, with one loop for both, users' pipelined scrapes (Trust III's row 2)
 * took 87% of the agent's allocation and the soak's probes up to 1.4 s in its early seconds.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
public final class AgentHttp implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(AgentHttp.class);
    public static final int READ_TIMEOUT_SECONDS = 5;
    public static final int MAX_CONNECTIONS = 64;
    /** Slots only root's connections take: users other than root hold at most the rest between them. */
    public static final int ROOT_SLOTS = 16;
    static final int RETRY_SECONDS = 2;
    /** How long a rendered scrape is answered again instead of rendering a new one. */
    static final long SCRAPE_REUSE_MILLIS = 1000;

    private final InetSocketAddress address;
    private final EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, NioIoHandler.newFactory());
    /** The probe socket's loop: root's alone, never behind the TCP port's requests. */
    private final EventLoopGroup probeGroup = new MultiThreadIoEventLoopGroup(1, NioIoHandler.newFactory());
    /** The last scrape rendered, and when ({@link System#nanoTime()}); guarded by {@code this}. */
    private String scraped;
    private long scrapedAt;
    private final PrometheusMeterRegistry registry;
    /** Kept: the registry's function counters hold it weakly. */
    private final AgentMetrics metrics;
    private final NodeAgent agent;
    private final BooleanSupplier extraReadiness;
    private final AtomicInteger open = new AtomicInteger();
    /** Connections of users other than root. */
    private final AtomicInteger others = new AtomicInteger();
    /** The kernel's sockets, asked whose a client's is; used from the event loop only. */
    private SockDiag diag;
    private boolean diagFailed;
    private volatile Channel bound;
    private volatile Channel probe;
    private volatile Path probePath;
    private volatile String bindFailure;
    private volatile boolean closed;

    private AgentHttp(InetSocketAddress address, NodeAgent agent, BooleanSupplier extraReadiness) {
        this.address = address;
        this.agent = agent;
        this.extraReadiness = extraReadiness;
        this.registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        this.metrics = new AgentMetrics(agent);
        metrics.bindTo(registry);
    }

    /**
     * Serves on {@code address}, or, when it cannot bind there now, keeps trying in the background
     * ({@link #bindFailure()} says why meanwhile).
     */
    public static AgentHttp start(InetSocketAddress address, NodeAgent agent, BooleanSupplier extraReadiness) {
        AgentHttp http = new AgentHttp(address, agent, extraReadiness);
        http.bindProbeSocket();
        http.bind(true);
        return http;
    }

    /**
     * Where the same endpoints are served to root alone: a Unix socket beside the control socket
     * ({@code /run/sockmap4j/<pin dir>/probe.sock}), mode 0600 in the agent's root-owned directory,
     * so no other user can bind it first, connect to it, or fill it. The kubelet's probes go there
     * (an exec probe: {@code curl --unix-socket ... http://agent/readyz}); a TCP port, which any
     * user may take while the agent restarts, is for metrics.
     */
    public static Path probeSocket(Path pinDirectory) {
        return SockmapAdmin.of(pinDirectory).agentSocket().resolveSibling(PROBE_SOCKET);
    }

    static final String PROBE_SOCKET = "probe.sock";

    private void bindProbeSocket() {
        Path path = probeSocket(agent.options().pinDirectory());
        // Bound under a name of its own, made root's alone, then renamed into place: no moment at
        // which the final name accepts anyone else's connection.
        Path temp = path.resolveSibling(PROBE_SOCKET + ".new");
        try {
            Files.deleteIfExists(temp);
            ChannelFuture f = new ServerBootstrap().group(probeGroup).channel(NioServerDomainSocketChannel.class)
                    .childHandler(new ChannelInitializer<Channel>() {
                        @Override
                        protected void initChannel(Channel ch) {
                            ch.pipeline().addLast(new RequestDeadline(), new HttpServerCodec(4096, 8192, 8192),
                                    new HttpServerKeepAliveHandler(), new HttpObjectAggregator(0), new Endpoints());
                        }
                    })
                    .bind(UnixDomainSocketAddress.of(temp)).awaitUninterruptibly();
            if (!f.isSuccess()) {
                throw new IOException(String.valueOf(f.cause().getMessage()), f.cause());
            }
            probe = f.channel();
            Files.setPosixFilePermissions(temp, PosixFilePermissions.fromString("rw-------"));
            Files.move(temp, path, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            probePath = path;
        } catch (IOException | RuntimeException e) {
            LOG.error("Cannot serve the agent's health on {} ({}): probes must use the TCP port", path,
                    e.getMessage());
            if (probe != null) {
                probe.close().awaitUninterruptibly();
                probe = null;
            }
            try {
                Files.deleteIfExists(temp);
            } catch (IOException ignored) {
                // nothing more to do
            }
        }
    }

    /** The Unix socket the probes use, or null when it could not be made. */
    public Path probePath() {
        return probePath;
    }

    private void bind(boolean first) {
        if (closed) {
            return;
        }
        ServerBootstrap b = new ServerBootstrap().group(group).channel(NioServerSocketChannel.class)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        // Root's (the kubelet's probes) may take every slot; other users together
                        // the share left after ROOT_SLOTS, so that no user can hold the probes off.
                        boolean root = peerUid(ch) == 0;
                        if (open.incrementAndGet() > MAX_CONNECTIONS
                                || !root && others.incrementAndGet() > MAX_CONNECTIONS - ROOT_SLOTS) {
                            open.decrementAndGet();
                            if (!root) {
                                others.decrementAndGet();
                            }
                            ch.close();
                            return;
                        }
                        ch.closeFuture().addListener(f -> {
                            open.decrementAndGet();
                            if (!root) {
                                others.decrementAndGet();
                            }
                        });
                        ch.pipeline().addLast(new RequestDeadline(), new HttpServerCodec(4096, 8192, 8192),
                                new HttpServerKeepAliveHandler(), new HttpObjectAggregator(0), new Endpoints());
                    }
                })
                .childOption(ChannelOption.WRITE_BUFFER_WATER_MARK, new WriteBufferWaterMark(32 << 10, 64 << 10));
        ChannelFuture f = b.bind(address);
        if (first) {
            // From the caller's thread (never the event loop's): the first outcome is known when start returns.
            f.awaitUninterruptibly();
            bound(f, true);
        } else {
            f.addListener(done -> bound(f, false));
        }
    }

    private synchronized void bound(ChannelFuture f, boolean first) {
        if (f.isSuccess()) {
            bound = f.channel();
            if (bindFailure != null) {
                LOG.info("The agent's metrics and health are served on {} now", bound.localAddress());
                bindFailure = null;
            }
            return;
        }
        String why = String.valueOf(f.cause().getMessage());
        if (first || !why.equals(bindFailure)) {
            LOG.error("Cannot serve the agent's metrics and health on {} ({}): trying again every {} s; the control "
                    + "socket works meanwhile (another --metrics-port, or free the port)", address, why,
                    RETRY_SECONDS);
        }
        bindFailure = why;
        if (!closed) {
            group.schedule(() -> bind(false), RETRY_SECONDS, TimeUnit.SECONDS);
        }
    }

    /** Why it does not serve yet (its port held by another process), or null once it does. */
    public String bindFailure() {
        return bound == null ? bindFailure : null;
    }

    /** The address it serves on, or null while it cannot bind. */
    public InetSocketAddress address() {
        Channel c = bound;
        return c == null ? null : (InetSocketAddress) c.localAddress();
    }

    /** The address asked for. */
    public InetSocketAddress requested() {
        return address;
    }

    /**
     * The uid owning the client's socket (sock_diag, this namespace), or -1 when the kernel does not
     * say (then it counts as another user's).
     */
    private int peerUid(SocketChannel ch) {
        if (diagFailed || !(ch.remoteAddress() instanceof InetSocketAddress peer)
                || !(ch.localAddress() instanceof InetSocketAddress own)) {
            return -1;
        }
        try {
            if (diag == null) {
                diag = SockDiag.open();
            }
            return diag.ownerUid(SockKeyLayout.mapped(peer.getAddress()), peer.getPort(), SockKeyLayout.mapped(own.getAddress()),
                    own.getPort());
        } catch (IOException | RuntimeException e) {
            diagFailed = true;
            LOG.warn("Cannot tell whose connections the metrics port has ({}): every one counts as another user's, "
                    + "and {} of {} slots are root's alone", e.toString(), ROOT_SLOTS, MAX_CONNECTIONS);
            return -1;
        }
    }

    /**
     * Each request must come whole within {@link #READ_TIMEOUT_SECONDS} of the connection's start or
     * of the last response: a deadline, not an idle timer, so that a client sending a byte now and
     * then holds no slot for longer. A keep-alive connection with no request for that long closes.
     */
    private static final class RequestDeadline extends io.netty.channel.ChannelDuplexHandler {
        private io.netty.util.concurrent.ScheduledFuture<?> deadline;

        @Override
        public void channelActive(ChannelHandlerContext ctx) throws Exception {
            arm(ctx);
            super.channelActive(ctx);
        }

        private void arm(ChannelHandlerContext ctx) {
            disarm();
            deadline = ctx.executor().schedule(() -> {
                ctx.close();
            }, READ_TIMEOUT_SECONDS, TimeUnit.SECONDS);
        }

        private void disarm() {
            if (deadline != null) {
                deadline.cancel(false);
                deadline = null;
            }
        }

        /** A whole request came: no deadline until its response is written. */
        void requestCame() {
            disarm();
        }

        @Override
        public void write(ChannelHandlerContext ctx, Object msg, io.netty.channel.ChannelPromise promise) {
            // A response: the next request's time starts once it is written.
            ctx.write(msg, promise.unvoid()).addListener(f -> {
                if (ctx.channel().isActive()) {
                    arm(ctx);
                }
            });
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) throws Exception {
            disarm();
            super.channelInactive(ctx);
        }
    }

    private final class Endpoints extends SimpleChannelInboundHandler<FullHttpRequest> {
        @Override
        public void channelWritabilityChanged(ChannelHandlerContext ctx) throws Exception {
            ctx.channel().config().setAutoRead(ctx.channel().isWritable());
            super.channelWritabilityChanged(ctx);
        }

        @Override
        protected void channelRead0(ChannelHandlerContext ctx, FullHttpRequest req) {
            RequestDeadline d = ctx.pipeline().get(RequestDeadline.class);
            if (d != null) {
                d.requestCame();
            }
            if (!ctx.channel().isWritable()) {
                // Requests sent on while the answers to the last ones lie unread: no more answers to hold.
                ctx.close();
                return;
            }
            if (!req.decoderResult().isSuccess()) {
                reply(ctx, req, HttpResponseStatus.BAD_REQUEST, "bad request\n", "text/plain", true);
                return;
            }
            if (req.method() != HttpMethod.GET && req.method() != HttpMethod.HEAD) {
                reply(ctx, req, HttpResponseStatus.METHOD_NOT_ALLOWED, "GET only\n", "text/plain", false);
                return;
            }
            String path = req.uri();
            int q = path.indexOf('?');
            path = q < 0 ? path : path.substring(0, q);
            switch (path) {
                case "/metrics" -> {
                    String body;
                    try {
                        body = scrape();
                    } catch (RuntimeException e) {
                        // Answered and logged: a scrape that fails says why, where an empty reply said nothing.
                        scrapeFailed(e);
                        reply(ctx, req, HttpResponseStatus.INTERNAL_SERVER_ERROR, "the metrics could not be "
                                + "written: " + e + "\n", "text/plain", false);
                        return;
                    }
                    reply(ctx, req, HttpResponseStatus.OK, body, "text/plain; version=0.0.4", false);
                }
                case "/healthz" -> {
                    boolean alive = agent.isAlive();
                    reply(ctx, req, alive ? HttpResponseStatus.OK : HttpResponseStatus.SERVICE_UNAVAILABLE,
                            alive ? "ok\n" : "control plane down\n", "text/plain", false);
                }
                case "/readyz" -> {
                    boolean ready = agent.isReady() && extraReadiness.getAsBoolean();
                    reply(ctx, req, ready ? HttpResponseStatus.OK : HttpResponseStatus.SERVICE_UNAVAILABLE,
                            ready ? "ready\n" : "not ready\n", "text/plain", false);
                }
                default -> reply(ctx, req, HttpResponseStatus.NOT_FOUND, "/metrics, /healthz, /readyz\n",
                        "text/plain", false);
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            // A read timeout or a client gone: nothing of the agent's is at stake.
            ctx.close();
        }
    }

    /** The registry the endpoints scrape (a test adds a meter that fails it). */
    PrometheusMeterRegistry registry() {
        return registry;
    }

    /** When the last failed scrape was logged (at most one line a minute: scrapes come every few seconds). */
    private long scrapeFailureLogged = Long.MIN_VALUE;

    private void scrapeFailed(RuntimeException e) {
        long now = System.nanoTime();
        if (scrapeFailureLogged == Long.MIN_VALUE || now - scrapeFailureLogged > java.util.concurrent.TimeUnit.MINUTES.toNanos(1)) {
            scrapeFailureLogged = now;
            LOG.error("A scrape of the agent's /metrics failed (answered 500; logged once a minute): {}", e.toString(), e);
        }
    }

    private static void reply(ChannelHandlerContext ctx, FullHttpRequest req, HttpResponseStatus status, String body,
                              String type, boolean close) {
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        FullHttpResponse res = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1, status,
                req.method() == HttpMethod.HEAD ? Unpooled.EMPTY_BUFFER : Unpooled.wrappedBuffer(b));
        res.headers().set(HttpHeaderNames.CONTENT_TYPE, type).setInt(HttpHeaderNames.CONTENT_LENGTH, b.length);
        if (close) {
            HttpUtil.setKeepAlive(res, false);
        }
        ChannelFuture f = ctx.writeAndFlush(res);
        if (close) {
            f.addListener(ChannelFutureListener.CLOSE);
        }
    }

    /** The registry's text, rendered at most once every {@link #SCRAPE_REUSE_MILLIS} ms, from either loop. */
    synchronized String scrape() {
        long now = System.nanoTime();
        if (scraped == null || now - scrapedAt >= TimeUnit.MILLISECONDS.toNanos(SCRAPE_REUSE_MILLIS)) {
            scraped = registry.scrape();
            scrapedAt = now;
        }
        return scraped;
    }

    @Override
    public void close() {
        closed = true;
        Channel c = bound;
        if (c != null) {
            c.close().awaitUninterruptibly();
        }
        Channel p = probe;
        if (p != null) {
            p.close().awaitUninterruptibly();
        }
        if (probePath != null) {
            try {
                Files.deleteIfExists(probePath);
            } catch (IOException e) {
                LOG.warn("Could not remove {}: {}", probePath, e.getMessage());
            }
        }
        try {
            // Its memory is confined to the event loop's thread: closed there.
            group.submit(() -> {
                if (diag != null) {
                    diag.close();
                    diag = null;
                }
            }).awaitUninterruptibly();
        } catch (java.util.concurrent.RejectedExecutionException stopped) {
            // The loop is gone already, and its thread with it.
        }
        group.shutdownGracefully(0, 2, TimeUnit.SECONDS).awaitUninterruptibly();
        probeGroup.shutdownGracefully(0, 2, TimeUnit.SECONDS).awaitUninterruptibly();
        registry.close();
    }
}
