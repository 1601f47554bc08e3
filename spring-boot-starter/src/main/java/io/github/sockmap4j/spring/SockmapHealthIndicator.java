package io.github.sockmap4j.spring;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapStats;
import org.springframework.boot.health.contributor.AbstractHealthIndicator;
import org.springframework.boot.health.contributor.Health;

/**
 * The {@code sockmap} health component: whether this service's connections take the fast path,
 * or why not, and the kernel's counters of its pin directory. A service on plain TCP is up (it
 * serves, only slower): the details say so, and {@code sockmap4j.require=true} is what turns a
 * missing fast path into a failed start.
 */
public class SockmapHealthIndicator extends AbstractHealthIndicator {
    private final Sockmap sockmap;

    public SockmapHealthIndicator(Sockmap sockmap) {
        super("sockmap4j health check failed");
        this.sockmap = sockmap;
    }

    @Override
    protected void doHealthCheck(Health.Builder builder) {
        builder.up().withDetail("active", sockmap.isActive()).withDetail("pinDirectory",
                sockmap.config().pinDirectory().toString());
        if (!sockmap.isActive()) {
            builder.withDetail("reason", String.valueOf(sockmap.unavailabilityCause()));
            return;
        }
        sockmap.cgroup().ifPresent(c -> builder.withDetail("cgroup", c.toString()));
        builder.withDetail("fionread", sockmap.fionread().name());
        SockmapStats s = sockmap.stats();
        builder.withDetail("socketsInMap", s.socketsInMap())
                .withDetail("bytesRedirected", s.bytesRedirected())
                .withDetail("bytesPassed", s.bytesPassed())
                .withDetail("messagesRedirected", s.messagesRedirected())
                .withDetail("messagesPassed", s.messagesPassed())
                .withDetail("boundHits", s.boundHits())
                .withDetail("registerFailures", s.registerFailures());
    }
}
