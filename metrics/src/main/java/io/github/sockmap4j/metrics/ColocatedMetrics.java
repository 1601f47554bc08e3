package io.github.sockmap4j.metrics;

import io.github.sockmap4j.colocated.grpc.ColocatedGrpc;
import io.github.sockmap4j.colocated.grpc.Fallback;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.binder.MeterBinder;
import java.util.Locale;

/**
 * Micrometer meters of this process's co-located gRPC agreements: {@code sockmap4j.colocated.agreements}
 * counted by {@code outcome}, {@code upgraded} or the fallback's reason in lower case
 * ({@code not_ours}, {@code proxied}, {@code no_broker}, ...; {@link Fallback}), and the message
 * bodies it lent ({@code sockmap4j.colocated.lent.messages}, {@code .bytes}, {@code .no_room}). Needs
 * {@code sockmap4j-colocated-grpc} (which {@code sockmap4j-netty-transport} brings).
 */
public final class ColocatedMetrics implements MeterBinder {
    /** Meters of this process's counts ({@link ColocatedGrpc#upgrades()}, {@link ColocatedGrpc#fallbacks()}). */
    public ColocatedMetrics() {
    }

    /**
     * Registers the meters. Their state is {@link ColocatedGrpc}'s class, not this binder: a
     * registry holds a function counter's state weakly, and {@code new ColocatedMetrics().bindTo(registry)}
     * keeps no binder alive.
     */
    @Override
    public void bindTo(MeterRegistry registry) {
        FunctionCounter.builder("sockmap4j.colocated.agreements", ColocatedGrpc.class, c -> ColocatedGrpc.upgrades())
                .description("co-located gRPC agreements of this process, either end, by outcome")
                .tag("outcome", "upgraded").register(registry);
        FunctionCounter.builder("sockmap4j.colocated.lent.messages", ColocatedGrpc.class, c -> ColocatedGrpc.messagesLent())
                .description("messages this process lent over co-located connections (bodies left in shared memory)")
                .register(registry);
        FunctionCounter.builder("sockmap4j.colocated.lent.bytes", ColocatedGrpc.class, c -> ColocatedGrpc.bytesLent())
                .description("the bodies of those messages: bytes no ring carried").baseUnit("bytes").register(registry);
        FunctionCounter.builder("sockmap4j.colocated.lent.no_room", ColocatedGrpc.class, c -> ColocatedGrpc.lendingNoRoom())
                .description("lendable messages copied through a ring because this end's heap had no room for them")
                .register(registry);
        for (Fallback f : Fallback.values()) {
            FunctionCounter.builder("sockmap4j.colocated.agreements", ColocatedGrpc.class, c -> ColocatedGrpc.fallbacks().get(f))
                    .description("co-located gRPC agreements of this process, either end, by outcome")
                    .tag("outcome", f.name().toLowerCase(Locale.ROOT)).register(registry);
        }
    }
}
