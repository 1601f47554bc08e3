package io.github.sockmap4j.linux.ffi;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The per-architecture tables and the verdict on platforms without one. */
class PlatformTest {
    @Test
    void knownArchitecturesHaveTheirTable() {
        assertSame(Platform.X86_64, Platform.detect("Linux", "amd64"));
        assertSame(Platform.AARCH64, Platform.detect("Linux", "aarch64"));
        assertTrue(Platform.X86_64.supported());
        assertEquals(12, NativeLayouts.epollEvent(Platform.X86_64).byteSize(), "packed on x86_64");
        assertEquals(16, NativeLayouts.epollEvent(Platform.AARCH64).byteSize(), "natural on aarch64");
        assertEquals(8, Platform.AARCH64.epollDataOffset());
    }

    @Test
    void foreignArchitectureIsUnsupportedWithItsName() {
        Platform p = Platform.detect("Linux", "riscv64");
        assertFalse(p.supported());
        assertTrue(p.unsupportedReason().contains("os.arch=riscv64"), p.unsupportedReason());
    }

    @Test
    void otherOperatingSystemIsUnsupportedWithItsName() {
        Platform p = Platform.detect("Mac OS X", "aarch64");
        assertFalse(p.supported());
        assertTrue(p.unsupportedReason().contains("not Linux (os.name=Mac OS X)"), p.unsupportedReason());
    }

    @Test
    void thisMachineIsSupported() {
        assertTrue(Platform.current().supported(), "the build machine has a table: " + Platform.current());
    }
}
