package io.github.sockmap4j.linux.bpf;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

/** What the start-up probe makes of FIONREAD's counts of its 64-byte messages; no kernel needed. */
class KernelProbeClassifyTest {
    @Test
    void eachCombinationOfCountsIsKept() {
        assertEquals(new KernelProbe.Counts(true, true), KernelProbe.classify(64, 64));
        assertEquals(new KernelProbe.Counts(false, true), KernelProbe.classify(0, 64));
        assertEquals(new KernelProbe.Counts(true, false), KernelProbe.classify(64, 0));
        assertEquals(new KernelProbe.Counts(false, false), KernelProbe.classify(0, 0));
    }

    @Test
    void aPartialCountIsNotACount() {
        assertEquals(new KernelProbe.Counts(false, true), KernelProbe.classify(32, 64));
        assertEquals(new KernelProbe.Counts(true, false), KernelProbe.classify(64, 128));
    }
}
