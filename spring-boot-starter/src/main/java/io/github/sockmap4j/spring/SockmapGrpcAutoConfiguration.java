package io.github.sockmap4j.spring;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.netty.SockmapNetty;
import io.github.sockmap4j.netty.grpc.SockmapGrpc;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.netty.channel.EventLoopGroup;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingClass;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.env.Environment;
import org.springframework.grpc.client.GrpcChannelBuilderCustomizer;
import org.springframework.grpc.server.ServerBuilderCustomizer;

/**
 * Spring gRPC on the fast path: a {@link ServerBuilderCustomizer} and a
 * {@link GrpcChannelBuilderCustomizer} that put the server and every channel built by Spring's
 * channel factory on the transport ({@link SockmapGrpc}). Both need {@code io.grpc:grpc-netty}:
 * {@code grpc-netty-shaded} carries a Netty of its own that nothing outside it can reach (logged
 * at start), and a server on a Unix domain socket or a {@code unix:} channel is left as it is
 * (logged too): the fast path is TCP's.
 */
@AutoConfiguration(after = SockmapAutoConfiguration.class)
@ConditionalOnBean(SockmapNetty.class)
public class SockmapGrpcAutoConfiguration {
    private static final Logger LOG = LoggerFactory.getLogger(SockmapGrpcAutoConfiguration.class);

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass({NettyServerBuilder.class, ServerBuilderCustomizer.class})
    static class Server {
        @Bean
        ServerBuilderCustomizer<NettyServerBuilder> sockmapGrpcServer(SockmapNetty transport,
                @Qualifier(SockmapAutoConfiguration.EVENT_LOOPS) EventLoopGroup loops, SockmapProperties properties,
                Environment env, Sockmap sockmap) {
            int bound = properties.inFlightBoundBytes();
            return builder -> {
                if (domainSocketServer(env)) {
                    LOG.info("The gRPC server listens on a Unix domain socket: it stays off the sockmap fast path");
                    return;
                }
                // its channels the fast path's, and co-located connections agreed to (unless switched off)
                SockmapGrpc.acceptedBy(builder, transport.serverChannels(bound)).bossEventLoopGroup(loops)
                        .workerEventLoopGroup(loops);
                GrpcProfiles.executor(builder, properties);
                LOG.info("The gRPC server {} ({}, profile {}{})", FastPathState.of(sockmap), transport,
                        properties.getGrpcProfile(), properties.getGrpcNonBlockingServices().isEmpty() ? ""
                                : ", on the event loops: " + String.join(", ", properties.getGrpcNonBlockingServices()));
            };
        }

        private static boolean domainSocketServer(Environment env) {
            String transport = env.getProperty("spring.grpc.server.netty.transport", "");
            String path = env.getProperty("spring.grpc.server.netty.domain-socket-path", "");
            return transport.replace("_", "-").equalsIgnoreCase("domain-socket") || !path.isBlank();
        }
    }

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass({NettyChannelBuilder.class, GrpcChannelBuilderCustomizer.class})
    static class Client {
        @Bean
        GrpcChannelBuilderCustomizer<NettyChannelBuilder> sockmapGrpcChannels(SockmapNetty transport,
                @Qualifier(SockmapAutoConfiguration.EVENT_LOOPS) EventLoopGroup loops, SockmapProperties properties,
                Environment env) {
            return (name, builder) -> {
                String target = env.getProperty("spring.grpc.client.channel." + name + ".target", name);
                if (target.startsWith("unix:") || name.startsWith("unix:")) {
                    LOG.info("gRPC channel {} ({}) is a Unix domain socket: it stays off the sockmap fast path", name,
                            target);
                    return;
                }
                SockmapGrpc.configure(builder, transport, loops);
                GrpcProfiles.executor(builder, properties.getGrpcProfile());
                if (properties.isGrpcCallbacksOnLoops()) {
                    SockmapGrpc.runOnEventLoops(builder);
                }
            };
        }
    }

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = "io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder")
    @ConditionalOnMissingClass("io.grpc.netty.NettyServerBuilder")
    static class Shaded {
        Shaded() {
            LOG.warn("gRPC runs on io.grpc:grpc-netty-shaded, whose Netty sockmap4j's transport cannot reach: its "
                    + "server and channels stay on plain TCP unless the node agent opts their ports in (then they are "
                    + "redirected without credit). Depend on io.grpc:grpc-netty instead (Spring gRPC uses it when it "
                    + "is on the class path).");
        }
    }
}
