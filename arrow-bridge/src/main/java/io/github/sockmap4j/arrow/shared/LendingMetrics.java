package io.github.sockmap4j.arrow.shared;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.binder.MeterBinder;
import java.util.Locale;

/**
 * Micrometer meters of this process's Arrow lending: {@code sockmap4j.arrow.lending.agreements}
 * counted by {@code outcome}, {@code lent} or the reason nothing was, in lower case ({@code
 * proxied}, {@code no_broker}, {@code not_allowed}, ...; {@link Lending.Reason}), and the batches
 * and bytes this process lent ({@code sockmap4j.arrow.lending.batches}, {@code .bytes}). Needs
 * Micrometer ({@code micrometer-core}) on the class path, which this module does not bring.
 */
public final class LendingMetrics implements MeterBinder {
    /** Meters of this process's counts ({@link Lending#fallbacks()}, {@link BatchSender#batchesLent()}). */
    public LendingMetrics() {
    }

    /**
     * Registers the meters. Their state is the counting classes, not this binder: a registry holds
     * a function counter's state weakly, and {@code new LendingMetrics().bindTo(registry)} keeps no
     * binder alive.
     */
    @Override
    public void bindTo(MeterRegistry registry) {
        String agreements = "sockmap4j.arrow.lending.agreements";
        String what = "Arrow lending agreements of this process, either end, by outcome";
        FunctionCounter.builder(agreements, Lending.class, c -> Lending.lentAgreements()).description(what)
                .tag("outcome", "lent").register(registry);
        for (Lending.Reason r : Lending.Reason.values()) {
            FunctionCounter.builder(agreements, Lending.class, c -> Lending.fallbacks().get(r)).description(what)
                    .tag("outcome", r.name().toLowerCase(Locale.ROOT)).register(registry);
        }
        FunctionCounter.builder("sockmap4j.arrow.lending.batches", BatchSender.class, c -> BatchSender.batchesLent())
                .description("Arrow batches this process lent by reference").register(registry);
        FunctionCounter.builder("sockmap4j.arrow.lending.bytes", BatchSender.class, c -> BatchSender.bytesLent())
                .description("bytes of the Arrow batches this process lent by reference, which no socket carried")
                .baseUnit("bytes").register(registry);
    }
}
