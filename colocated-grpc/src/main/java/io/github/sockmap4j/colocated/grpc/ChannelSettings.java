package io.github.sockmap4j.colocated.grpc;

import io.grpc.ManagedChannelBuilder;
import io.grpc.internal.GrpcUtil;
import io.grpc.internal.ManagedChannelImplBuilder;
import io.grpc.internal.ObjectPool;
import java.lang.reflect.Field;
import java.util.concurrent.Executor;

/**
 * What a channel's co-located connection takes from the builder the channel was made with, so that
 * a call that moves meets what it met over HTTP/2: its callbacks on the channel's executor (the
 * direct one included: on the thread that read them), the channel's inbound message and metadata
 * limits, its user agent.
 *
 * <p>gRPC keeps these in its builders' fields, with no getters; this reads them by name after the
 * channel is built (checked against gRPC 1.84: {@code ManagedChannelImplBuilder.executorPool},
 * {@code userAgent}, and the transport builder's {@code maxInboundMessageSize} and
 * {@code maxHeaderListSize} or {@code maxInboundMetadataSize}). A builder read otherwise gets no
 * co-located connection ({@link Fallback#CHANNEL_UNREADABLE}), never one on another executor.
 *
 * @param executor    the channel's own executor; null for gRPC's default
 * @param maxMessage  the largest inbound message
 * @param maxMetadata the largest inbound metadata
 * @param userAgent   the channel's user agent; null for none set
 */
record ChannelSettings(Executor executor, int maxMessage, int maxMetadata, String userAgent) {
    /** gRPC's defaults: what {@link ColocatedChannelBuilder} has unless told. */
    static final ChannelSettings DEFAULTS = new ChannelSettings(null, GrpcUtil.DEFAULT_MAX_MESSAGE_SIZE,
            GrpcUtil.DEFAULT_MAX_HEADER_LIST_SIZE, null);

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
        if (builder == impl) {
            return new ChannelSettings(executor, DEFAULTS.maxMessage(), DEFAULTS.maxMetadata(), (String) ua);
        }
        Object message = read(builder, "maxInboundMessageSize");
        Object metadata = readEither(builder, "maxHeaderListSize", "maxInboundMetadataSize");
        if (!(message instanceof Integer m) || !(metadata instanceof Integer h) || !(ua == null || ua instanceof String)) {
            throw new NoSuchFieldException(builder.getClass().getName() + "'s limits are not as expected");
        }
        return new ChannelSettings(executor, m, h, (String) ua);
    }

    /** {@code b} with these settings. */
    ColocatedChannelBuilder applyTo(ColocatedChannelBuilder b) {
        if (executor != null) {
            b.executor(executor);
        }
        if (userAgent != null) {
            b.userAgent(userAgent);
        }
        return b.maxInboundMessageSize(maxMessage).maxInboundMetadataSize(maxMetadata);
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
