package io.github.sockmap4j;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.sockmap4j.linux.bpf.KernelProbe;
import org.junit.jupiter.api.Test;

/** The public names of what the start-up probe counted; no kernel needed. */
class FionreadTest {
    @Test
    void eachCombinationOfCountsHasItsName() {
        assertEquals(Fionread.ALL_BYTES, Fionread.of(new KernelProbe.Counts(true, true)));
        assertEquals(Fionread.TCP_BYTES_ONLY, Fionread.of(new KernelProbe.Counts(false, true)));
        assertEquals(Fionread.REDIRECTED_BYTES_ONLY, Fionread.of(new KernelProbe.Counts(true, false)));
        assertEquals(Fionread.NO_BYTES, Fionread.of(new KernelProbe.Counts(false, false)));
        assertEquals(Fionread.NOT_PROBED, Fionread.of(null));
    }
}
