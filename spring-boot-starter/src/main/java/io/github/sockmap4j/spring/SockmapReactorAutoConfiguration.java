package io.github.sockmap4j.spring;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.netty.SockmapNetty;
import io.github.sockmap4j.reactor.SockmapLoopResources;
import java.time.Duration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.context.annotation.Bean;
import org.springframework.http.client.ReactorResourceFactory;
import reactor.netty.http.HttpResources;
import reactor.netty.resources.LoopResources;
import reactor.netty.tcp.TcpResources;

/**
 * Reactor Netty on the fast path: WebFlux's server, WebClient and Spring Cloud Gateway's client.
 * Spring Boot gives its server {@code runOn(ReactorResourceFactory.getLoopResources())} after
 * the service's own {@code NettyServerCustomizer}s, overwriting any {@code runOn} of theirs, and
 * builds WebClient's connector from the same factory; by default that factory hands out Reactor
 * Netty's global resources, which Gateway's client and any {@code HttpClient.create()} use too.
 * So the loops go in there: as Reactor Netty's global HTTP and TCP loops before the factory
 * starts, or as the factory's own loops when a service turned the global resources off.
 */
@AutoConfiguration(after = SockmapAutoConfiguration.class)
@ConditionalOnClass({LoopResources.class, SockmapLoopResources.class})
@ConditionalOnBean(SockmapNetty.class)
public class SockmapReactorAutoConfiguration {
    private static final Logger LOG = LoggerFactory.getLogger(SockmapReactorAutoConfiguration.class);

    @Bean
    @ConditionalOnMissingBean
    public SockmapLoopResources sockmapLoopResources(SockmapNetty transport, SockmapProperties properties) {
        int loops = properties.getEventLoops() > 0 ? properties.getEventLoops() : LoopResources.DEFAULT_IO_WORKER_COUNT;
        SockmapLoopResources resources = SockmapLoopResources.create(transport, "reactor-http", loops, true,
                properties.inFlightBoundBytes());
        LOG.debug("Reactor Netty runs on {}", resources);
        return resources;
    }

    /** Disposes the loops at context close, if the resource factory has not done so already. */
    @Bean
    LoopsDisposer sockmapLoopsDisposer(SockmapLoopResources loops) {
        return new LoopsDisposer(loops);
    }

    record LoopsDisposer(SockmapLoopResources loops) implements org.springframework.beans.factory.DisposableBean {
        @Override
        public void destroy() {
            loops.disposeLater(Duration.ZERO, Duration.ofSeconds(10)).block();
        }
    }

    /**
     * Puts the loops into every {@link ReactorResourceFactory} before it starts: after its
     * initialization, when other post-processors have had their say on whether it uses the global
     * resources (Spring Boot's tests turn them off), and before the context starts it.
     */
    @Bean
    static BeanPostProcessor sockmapReactorResourceFactoryLoops(ObjectProvider<SockmapLoopResources> loops,
            ObjectProvider<Sockmap> sockmap) {
        return new BeanPostProcessor() {
            @Override
            public Object postProcessAfterInitialization(Object bean, String beanName) {
                if (bean instanceof ReactorResourceFactory factory) {
                    SockmapLoopResources resources = loops.getObject();
                    if (factory.isUseGlobalResources()) {
                        HttpResources.set(resources);
                        TcpResources.set(resources);
                    } else {
                        factory.setLoopResources(resources);
                    }
                    LOG.info("Reactor Netty ({}, {} resources) {}: {}", beanName,
                            factory.isUseGlobalResources() ? "global" : "its own", FastPathState.of(sockmap.getObject()),
                            resources);
                }
                return bean;
            }
        };
    }
}
