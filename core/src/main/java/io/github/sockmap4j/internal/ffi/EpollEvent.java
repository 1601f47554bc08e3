package io.github.sockmap4j.internal.ffi;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * {@code struct epoll_event { uint32_t events; epoll_data_t data; } __attribute__((packed))}
 * on x86_64: 12 bytes, data at offset 4. sockmap4j stores the fd in data.
 */
public final class EpollEvent {
    public static final long SIZE = 12;
    private static final ValueLayout.OfInt U32 = ValueLayout.JAVA_INT_UNALIGNED;

    private EpollEvent() {
    }

    public static void set(MemorySegment events, int index, int mask, int fd) {
        long base = index * SIZE;
        events.set(U32, base, mask);
        events.set(ValueLayout.JAVA_LONG_UNALIGNED, base + 4, fd);
    }

    public static int events(MemorySegment events, int index) {
        return events.get(U32, index * SIZE);
    }

    public static int fd(MemorySegment events, int index) {
        return events.get(U32, index * SIZE + 4);
    }
}
