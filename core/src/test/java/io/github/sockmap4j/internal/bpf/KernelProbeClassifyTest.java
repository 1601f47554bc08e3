package io.github.sockmap4j.internal.bpf;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.sockmap4j.Fionread;
import org.junit.jupiter.api.Test;

/** How the start-up probe names what FIONREAD counted (its 64-byte messages); no kernel needed. */
class KernelProbeClassifyTest {
    @Test
    void eachCombinationOfCountsHasItsName() {
        assertEquals(Fionread.ALL_BYTES, KernelProbe.classify(64, 64));
        assertEquals(Fionread.TCP_BYTES_ONLY, KernelProbe.classify(0, 64));
        assertEquals(Fionread.REDIRECTED_BYTES_ONLY, KernelProbe.classify(64, 0));
        assertEquals(Fionread.NO_BYTES, KernelProbe.classify(0, 0));
    }

    @Test
    void aPartialCountIsNotACount() {
        assertEquals(Fionread.TCP_BYTES_ONLY, KernelProbe.classify(32, 64));
        assertEquals(Fionread.REDIRECTED_BYTES_ONLY, KernelProbe.classify(64, 128));
    }
}
