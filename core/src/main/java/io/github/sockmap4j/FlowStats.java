package io.github.sockmap4j;

/**
 * How this process's cooperative writers waited for credit (docs/in-flight-bound.md): kept per
 * process, next to the kernel's counters in {@link SockmapStats}.
 *
 * @param creditWaits     writes (or Netty flushes) that found too little credit and waited
 * @param creditWaitNanos the time they waited, summed
 */
public record FlowStats(long creditWaits, long creditWaitNanos) {
}
