package io.github.sockmap4j.agent;

import io.github.sockmap4j.agent.NodeAgent;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.SocketChannel;
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
import io.netty.handler.timeout.ReadTimeoutHandler;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
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
 * never blocking on a client, a request (line and headers) read whole within
 * {@link #READ_TIMEOUT_SECONDS} or the connection closed, at most {@link #MAX_CONNECTIONS} open
 * connections (one more is closed at once), no request body. A port someone else holds is no reason
 * to stop the control plane: it is tried again every {@link #RETRY_SECONDS} seconds, said once,
 * until it binds.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
public final class AgentHttp implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(AgentHttp.class);
    public static final int READ_TIMEOUT_SECONDS = 5;
    public static final int MAX_CONNECTIONS = 64;
    static final int RETRY_SECONDS = 2;

    private final InetSocketAddress address;
    private final EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, NioIoHandler.newFactory());
    private final PrometheusMeterRegistry registry;
    /** Kept: the registry's function counters hold it weakly. */
    private final AgentMetrics metrics;
    private final NodeAgent agent;
    private final BooleanSupplier extraReadiness;
    private final AtomicInteger open = new AtomicInteger();
    private volatile Channel bound;
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
        http.bind(true);
        return http;
    }

    private void bind(boolean first) {
        if (closed) {
            return;
        }
        ServerBootstrap b = new ServerBootstrap().group(group).channel(NioServerSocketChannel.class)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        if (open.incrementAndGet() > MAX_CONNECTIONS) {
                            open.decrementAndGet();
                            ch.close();
                            return;
                        }
                        ch.closeFuture().addListener(f -> open.decrementAndGet());
                        ch.pipeline().addLast(new ReadTimeoutHandler(READ_TIMEOUT_SECONDS, TimeUnit.SECONDS),
                                new HttpServerCodec(4096, 8192, 8192), new HttpServerKeepAliveHandler(),
                                new HttpObjectAggregator(0), new Endpoints());
                    }
                });
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

    private final class Endpoints extends SimpleChannelInboundHandler<FullHttpRequest> {
        @Override
        protected void channelRead0(ChannelHandlerContext ctx, FullHttpRequest req) {
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
                case "/metrics" -> reply(ctx, req, HttpResponseStatus.OK, registry.scrape(),
                        "text/plain; version=0.0.4", false);
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

    @Override
    public void close() {
        closed = true;
        Channel c = bound;
        if (c != null) {
            c.close().awaitUninterruptibly();
        }
        group.shutdownGracefully(0, 2, TimeUnit.SECONDS).awaitUninterruptibly();
        registry.close();
    }
}
