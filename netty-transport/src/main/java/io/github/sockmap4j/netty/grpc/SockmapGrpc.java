package io.github.sockmap4j.netty.grpc;

import io.github.sockmap4j.netty.SockmapNetty;
import io.grpc.MethodDescriptor;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.util.concurrent.DefaultThreadFactory;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;

/**
 * gRPC-Java over the sockmap fast path, one line on each builder:
 *
 * <pre>{@code
 * Server server = SockmapGrpc.configure(NettyServerBuilder.forPort(port)).addService(...).build();
 * ManagedChannel ch = SockmapGrpc.configure(NettyChannelBuilder.forAddress("localhost", port)).usePlaintext().build();
 * }</pre>
 *
 * The server's port is opted in while it is bound; both sides run Netty's epoll transport (NIO
 * where epoll is unavailable) on a shared event loop group of daemon threads, and publish their
 * reads for the in-flight bound. Needs {@code io.grpc:grpc-netty} (not shaded) with Netty 4.2.
 */
public final class SockmapGrpc {
    private static final Object LOCK = new Object();
    private static EventLoopGroup shared;

    private SockmapGrpc() {
    }

    /** The event loop group the builders get unless given one; daemon threads, one per CPU. */
    public static EventLoopGroup sharedGroup() {
        synchronized (LOCK) {
            if (shared == null) {
                shared = new MultiThreadIoEventLoopGroup(Runtime.getRuntime().availableProcessors(),
                        new DefaultThreadFactory("sockmap4j-grpc", true), SockmapNetty.ioHandlerFactory());
            }
            return shared;
        }
    }

    public static NettyServerBuilder configure(NettyServerBuilder builder) {
        return configure(builder, sharedGroup(), sharedGroup());
    }

    public static NettyServerBuilder configure(NettyServerBuilder builder, EventLoopGroup boss, EventLoopGroup worker) {
        return builder.channelFactory(SockmapNetty.serverChannelFactory())
                .bossEventLoopGroup(boss)
                .workerEventLoopGroup(worker);
    }

    /**
     * As {@link #configure(NettyServerBuilder, EventLoopGroup, EventLoopGroup)}, over the fast path
     * of {@code transport} ({@link SockmapNetty#of}) instead of {@code Sockmap.global()}.
     *
     * @param builder   the server's builder
     * @param transport the transport over the service's own {@code Sockmap}
     * @param boss      the group that accepts
     * @param worker    the group that serves
     * @return {@code builder}
     */
    public static NettyServerBuilder configure(NettyServerBuilder builder, SockmapNetty transport, EventLoopGroup boss,
                                               EventLoopGroup worker) {
        return builder.channelFactory(transport.serverChannels(0)).bossEventLoopGroup(boss).workerEventLoopGroup(worker);
    }

    public static NettyChannelBuilder configure(NettyChannelBuilder builder) {
        return configure(builder, sharedGroup());
    }

    public static NettyChannelBuilder configure(NettyChannelBuilder builder, EventLoopGroup group) {
        return builder.channelFactory(SockmapNetty.socketChannelFactory()).eventLoopGroup(group);
    }

    /**
     * As {@link #configure(NettyChannelBuilder, EventLoopGroup)}, over the fast path of
     * {@code transport} instead of {@code Sockmap.global()}.
     *
     * @param builder   the channel's builder
     * @param transport the transport over the client's own {@code Sockmap}
     * @param group     the group its connections run on
     * @return {@code builder}
     */
    public static NettyChannelBuilder configure(NettyChannelBuilder builder, SockmapNetty transport,
                                                EventLoopGroup group) {
        return builder.channelFactory(transport.socketChannels()).eventLoopGroup(group);
    }

    /**
     * A marshaller of raw {@code byte[]} messages, for services that carry their own encoding
     * (Arrow IPC, say) or none; also what the tests, demo and benchmark use.
     */
    public static MethodDescriptor.Marshaller<byte[]> bytesMarshaller() {
        return BYTES;
    }

    private static final MethodDescriptor.Marshaller<byte[]> BYTES = new MethodDescriptor.Marshaller<>() {
        @Override
        public InputStream stream(byte[] value) {
            return new ByteArrayInputStream(value);
        }

        @Override
        public byte[] parse(InputStream stream) {
            try {
                return stream.readAllBytes();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    };
}
