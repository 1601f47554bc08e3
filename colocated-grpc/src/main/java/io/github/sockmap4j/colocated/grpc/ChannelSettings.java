package io.github.sockmap4j.colocated.grpc;

import io.grpc.ManagedChannelBuilder;
import io.grpc.internal.GrpcUtil;
import io.grpc.internal.ManagedChannelImplBuilder;
import io.grpc.internal.ObjectPool;
import java.lang.reflect.Field;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;

/**
 * What a channel's co-located connection takes from the builder the channel was made with, so that
 * a call that moves meets what it met over HTTP/2: its callbacks on the channel's executor (the
 * direct one included: on the thread that read them), the channel's inbound message and metadata
 * limits, its user agent, its keepalive; and whether it balances its calls over several servers,
 * which a co-located connection to one would not.
 *
 * <p>gRPC keeps these in its builders' fields, with no getters; this reads them by name after the
 * channel is built (checked against gRPC 1.84: {@code ManagedChannelImplBuilder.executorPool},
 * {@code userAgent}, {@code defaultLbPolicy}, {@code defaultServiceConfig}, and the transport
 * builder's {@code maxInboundMessageSize}, {@code maxHeaderListSize} or
 * {@code maxInboundMetadataSize}, and {@code keepAliveTimeNanos}, {@code keepAliveTimeoutNanos},
 * {@code keepAliveWithoutCalls}, where it has them). A builder read otherwise gets no
 * co-located connection ({@link Fallback#CHANNEL_UNREADABLE}), never one on another executor.
 *
 * @param executor    the channel's own executor; null for gRPC's default
 * @param maxMessage  the largest inbound message
 * @param maxMetadata the largest inbound metadata
 * @param userAgent   the channel's user agent; null for none set
 * @param balancer    the load-balancing policy the builder names, where it is not {@code pick_first}
 *                    (its default policy or the first of its default service config's); null
 * @param keepAlive   the channel's keepalive; {@link KeepAlive#OFF} where it set none
 */
record ChannelSettings(Executor executor, int maxMessage, int maxMetadata, String userAgent, String balancer,
                       KeepAlive keepAlive) {
    /** gRPC's defaults: what {@link ColocatedChannelBuilder} has unless told. */
    static final ChannelSettings DEFAULTS = new ChannelSettings(null, GrpcUtil.DEFAULT_MAX_MESSAGE_SIZE,
            GrpcUtil.DEFAULT_MAX_HEADER_LIST_SIZE, null, null, KeepAlive.OFF);

    /**
     * A channel's keepalive: a ping after {@code timeNanos} (at least gRPC's 10 s), the connection
     * ended where no answer comes within {@code timeoutNanos}; also while no call is open where
     * {@code withoutCalls}.
     */
    record KeepAlive(long timeNanos, long timeoutNanos, boolean withoutCalls) {
        static final KeepAlive OFF = new KeepAlive(GrpcUtil.KEEPALIVE_TIME_NANOS_DISABLED,
                GrpcUtil.DEFAULT_KEEPALIVE_TIMEOUT_NANOS, false);

        boolean on() {
            return timeNanos != GrpcUtil.KEEPALIVE_TIME_NANOS_DISABLED;
        }
    }

    /**
     * The settings of {@code builder}: a {@link ManagedChannelImplBuilder}, or a transport's builder
     * (Netty's, OkHttp's) that holds one.
     *
     * @throws ReflectiveOperationException naming what this gRPC does not have as expected
     */
    static ChannelSettings of(ManagedChannelBuilder<?> builder) throws ReflectiveOperationException {
        ManagedChannelImplBuilder impl = builder instanceof ManagedChannelImplBuilder m ? m : implOf(builder);
        Object pool = read(impl, "executorPool");
        Object defaultPool = read(ManagedChannelImplBuilder.class, null, "DEFAULT_EXECUTOR_POOL");
        Executor executor;
        if (pool == defaultPool) {
            executor = null;
        } else if (pool instanceof ObjectPool<?> p && pool.getClass().getSimpleName().equals("FixedObjectPool")
                && p.getObject() instanceof Executor e) {
            executor = e; // executor(e) and directExecutor() keep theirs in a fixed pool: nothing to give back
        } else {
            throw new NoSuchFieldException("ManagedChannelImplBuilder.executorPool is a "
                    + (pool == null ? "null" : pool.getClass().getName()));
        }
        Object ua = read(impl, "userAgent");
        String balancer = balancer(read(impl, "defaultLbPolicy"), read(impl, "defaultServiceConfig"));
        if (builder == impl) {
            return new ChannelSettings(executor, DEFAULTS.maxMessage(), DEFAULTS.maxMetadata(), (String) ua, balancer,
                    KeepAlive.OFF);
        }
        Object message = read(builder, "maxInboundMessageSize");
        Object metadata = readEither(builder, "maxHeaderListSize", "maxInboundMetadataSize");
        if (!(message instanceof Integer m) || !(metadata instanceof Integer h) || !(ua == null || ua instanceof String)) {
            throw new NoSuchFieldException(builder.getClass().getName() + "'s limits are not as expected");
        }
        return new ChannelSettings(executor, m, h, (String) ua, balancer, keepAlive(builder));
    }

    /**
     * The policy a builder's {@code defaultLoadBalancingPolicy} or {@code defaultServiceConfig}
     * names (a service config's {@code loadBalancingConfig}, the first entry, over its
     * {@code loadBalancingPolicy}, as gRPC reads them), where it is not {@code pick_first}; else null.
     */
    static String balancer(Object defaultPolicy, Object serviceConfig) throws NoSuchFieldException {
        String named = null;
        if (serviceConfig instanceof java.util.Map<?, ?> config) {
            if (config.get("loadBalancingConfig") instanceof java.util.List<?> list && !list.isEmpty()
                    && list.get(0) instanceof java.util.Map<?, ?> first && !first.isEmpty()) {
                named = String.valueOf(first.keySet().iterator().next());
            } else if (config.get("loadBalancingPolicy") instanceof String p) {
                named = p;
            }
        } else if (serviceConfig != null) {
            throw new NoSuchFieldException("ManagedChannelImplBuilder.defaultServiceConfig is a " + serviceConfig.getClass().getName());
        }
        if (named == null) {
            if (defaultPolicy != null && !(defaultPolicy instanceof String)) {
                throw new NoSuchFieldException("ManagedChannelImplBuilder.defaultLbPolicy is a " + defaultPolicy.getClass().getName());
            }
            named = (String) defaultPolicy;
        }
        return named == null || named.equalsIgnoreCase("pick_first") ? null : named;
    }

    /** The keepalive a transport's builder keeps (Netty's and OkHttp's fields); OFF where it has none. */
    private static KeepAlive keepAlive(ManagedChannelBuilder<?> builder) throws ReflectiveOperationException {
        Object time;
        try {
            time = read(builder, "keepAliveTimeNanos");
        } catch (NoSuchFieldException e) {
            return KeepAlive.OFF; // a builder without keepalive
        }
        Object timeout = read(builder, "keepAliveTimeoutNanos");
        Object without = read(builder, "keepAliveWithoutCalls");
        if (!(time instanceof Long t) || !(timeout instanceof Long o) || !(without instanceof Boolean w)) {
            throw new NoSuchFieldException(builder.getClass().getName() + "'s keepalive is not as expected");
        }
        return t == GrpcUtil.KEEPALIVE_TIME_NANOS_DISABLED ? KeepAlive.OFF : new KeepAlive(t, o, w);
    }

    /** {@code b} with these settings. */
    ColocatedChannelBuilder applyTo(ColocatedChannelBuilder b) {
        if (executor != null) {
            b.executor(executor);
        }
        if (userAgent != null) {
            b.userAgent(userAgent);
        }
        if (keepAlive.on()) {
            b.keepAliveTime(keepAlive.timeNanos(), TimeUnit.NANOSECONDS)
                    .keepAliveTimeout(keepAlive.timeoutNanos(), TimeUnit.NANOSECONDS)
                    .keepAliveWithoutCalls(keepAlive.withoutCalls());
        }
        return b.maxInboundMessageSize(maxMessage).maxInboundMetadataSize(maxMetadata);
    }

    /**
     * Whether the channel that {@code next} (what a channel's interceptor is given) belongs to was
     * shut down now ({@code shutdownNow}): read by name from gRPC 1.84's {@code ManagedChannelImpl}
     * behind its interceptors; always false where it is not found so.
     */
    static java.util.function.BooleanSupplier shutdownNowOf(io.grpc.Channel next) {
        try {
            Object c = next;
            for (int i = 0; i < 64 && c != null && c.getClass().getName().equals("io.grpc.ClientInterceptors$InterceptorChannel"); i++) {
                c = read(c, "channel");
            }
            if (c == null || !c.getClass().getName().equals("io.grpc.internal.ManagedChannelImpl$RealChannel")) {
                return () -> false;
            }
            // held weakly: the agreement's state must not keep its channel alive
            java.lang.ref.WeakReference<Object> channel = new java.lang.ref.WeakReference<>(read(c, "this$0"));
            Field nowed = channel.get().getClass().getDeclaredField("shutdownNowed");
            nowed.setAccessible(true);
            return () -> {
                Object ch = channel.get();
                try {
                    return ch != null && nowed.getBoolean(ch);
                } catch (IllegalAccessException e) {
                    return false;
                }
            };
        } catch (ReflectiveOperationException | RuntimeException e) {
            return () -> false;
        }
    }

    private static ManagedChannelImplBuilder implOf(ManagedChannelBuilder<?> builder) throws ReflectiveOperationException {
        for (Class<?> c = builder.getClass(); c != null; c = c.getSuperclass()) {
            for (Field f : c.getDeclaredFields()) {
                if (f.getType() == ManagedChannelImplBuilder.class) {
                    f.setAccessible(true);
                    return (ManagedChannelImplBuilder) f.get(builder);
                }
            }
        }
        throw new NoSuchFieldException(builder.getClass().getName() + " holds no ManagedChannelImplBuilder");
    }

    private static Object readEither(Object o, String name, String other) throws ReflectiveOperationException {
        try {
            return read(o, name);
        } catch (NoSuchFieldException e) {
            return read(o, other);
        }
    }

    private static Object read(Object o, String name) throws ReflectiveOperationException {
        return read(o.getClass(), o, name);
    }

    private static Object read(Class<?> type, Object o, String name) throws ReflectiveOperationException {
        for (Class<?> c = type; c != null; c = c.getSuperclass()) {
            try {
                Field f = c.getDeclaredField(name);
                f.setAccessible(true);
                return f.get(o);
            } catch (NoSuchFieldException next) {
                // its superclass may hold it
            }
        }
        throw new NoSuchFieldException(type.getName() + " has no field '" + name + "'");
    }
}
