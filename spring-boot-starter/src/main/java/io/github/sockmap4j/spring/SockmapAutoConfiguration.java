package io.github.sockmap4j.spring;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapUnavailableException;
import io.github.sockmap4j.metrics.SockmapMetrics;
import io.github.sockmap4j.netty.SockmapNetty;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.util.concurrent.DefaultThreadFactory;
import java.time.Duration;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBooleanProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Conditional;
import org.springframework.context.annotation.Configuration;

/**
 * The fast path of a Spring Boot service: a {@link Sockmap} opened from {@code sockmap4j.*},
 * the Netty transport over it, the event loops the gRPC server and channels run on, its health
 * and its meters. Only on Linux, and not with {@code sockmap4j.enabled=false}. A service that
 * defines its own {@link Sockmap} bean has it used instead.
 */
@AutoConfiguration
@Conditional(OnLinux.class)
@ConditionalOnBooleanProperty(name = "sockmap4j.enabled", matchIfMissing = true)
@EnableConfigurationProperties(SockmapProperties.class)
public class SockmapAutoConfiguration {
    /** Name of the event loop group bean the gRPC server and channels share. */
    public static final String EVENT_LOOPS = "sockmapEventLoopGroup";

    /**
     * Opened once per application context, closed with it. With {@code sockmap4j.require=true}
     * a fast path that is off, or does not cover this process, fails the start with the reason.
     */
    @Bean(destroyMethod = "close")
    @ConditionalOnMissingBean
    public Sockmap sockmap(SockmapProperties properties) {
        Sockmap s = Sockmap.open(properties.toConfig());
        if (properties.isRequire() && !s.isActive()) {
            String why = s.unavailabilityCause();
            s.close();
            throw new SockmapUnavailableException("the fast path does not cover this process: " + why, null);
        }
        return s;
    }

    @Bean
    @ConditionalOnMissingBean
    public SockmapNetty sockmapNetty(Sockmap sockmap) {
        return SockmapNetty.of(sockmap);
    }

    /**
     * The loops of the gRPC server and channels: daemon threads, shut down with the context,
     * every channel on them closed (as {@link SockmapNetty#shutdown} does); they poll before they
     * sleep as {@code sockmap4j.grpc-profile} says.
     */
    @Bean(name = EVENT_LOOPS)
    @ConditionalOnClass(name = "io.grpc.netty.NettyServerBuilder")
    @ConditionalOnMissingBean(name = EVENT_LOOPS)
    public EventLoopGroup sockmapEventLoopGroup(SockmapProperties properties) {
        int n = properties.getEventLoops() > 0 ? properties.getEventLoops()
                : Math.max(Runtime.getRuntime().availableProcessors(), 4);
        Duration poll = properties.getGrpcProfile().maxPoll();
        return new MultiThreadIoEventLoopGroup(n, new DefaultThreadFactory("sockmap4j-grpc", true),
                poll.isZero() ? SockmapNetty.ioHandlerFactory() : SockmapNetty.ioHandlerFactory(poll)) {
            // Spring calls close() on a bean with a public close method; this one waits for the loops.
            @Override
            public void close() {
                SockmapNetty.shutdown(Duration.ofSeconds(10), this);
            }
        };
    }

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = "org.springframework.boot.web.server.context.WebServerInitializedEvent")
    static class WebServers {
        /** Spring MVC on Tomcat or Jetty: their ports, opted in once listening. */
        @Bean
        SockmapWebServerPorts sockmapWebServerPorts(Sockmap sockmap) {
            return new SockmapWebServerPorts(sockmap);
        }
    }

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = "org.springframework.boot.health.contributor.HealthIndicator")
    static class Health {
        @Bean
        @ConditionalOnMissingBean(name = "sockmapHealthIndicator")
        SockmapHealthIndicator sockmapHealthIndicator(Sockmap sockmap) {
            return new SockmapHealthIndicator(sockmap);
        }
    }

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = "io.micrometer.core.instrument.binder.MeterBinder")
    static class Metrics {
        /** Bound to the service's registry by Spring Boot, as every {@code MeterBinder} bean is. */
        @Bean
        @ConditionalOnMissingBean
        SockmapMetrics sockmapMetrics(Sockmap sockmap) {
            return new SockmapMetrics(sockmap);
        }

        /** The co-located gRPC agreements' outcomes, where the transport is on the class path. */
        @Bean
        @ConditionalOnMissingBean
        @ConditionalOnClass(name = "io.github.sockmap4j.colocated.grpc.ColocatedGrpc")
        io.github.sockmap4j.metrics.ColocatedMetrics colocatedMetrics() {
            return new io.github.sockmap4j.metrics.ColocatedMetrics();
        }
    }
}
