package io.github.sockmap4j.linux.ffi;

import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * Arrays of {@code struct epoll_event { uint32_t events; epoll_data_t data; }}, laid out as
 * {@link NativeLayouts#EPOLL_EVENT} says for this platform (packed on x86_64). sockmap4j stores the
 * fd in data.
 */
public final class EpollEvent {
    /** sizeof(struct epoll_event) on this platform. */
    public static final long SIZE = NativeLayouts.EPOLL_EVENT.byteSize();
    private static final long EVENTS = NativeLayouts.EPOLL_EVENT.byteOffset(MemoryLayout.PathElement.groupElement("events"));
    private static final long DATA = NativeLayouts.EPOLL_EVENT.byteOffset(MemoryLayout.PathElement.groupElement("data"));

    private EpollEvent() {
    }

    public static void set(MemorySegment events, int index, int mask, int fd) {
        long base = index * SIZE;
        events.set(ValueLayout.JAVA_INT_UNALIGNED, base + EVENTS, mask);
        events.set(ValueLayout.JAVA_LONG_UNALIGNED, base + DATA, fd);
    }

    public static int events(MemorySegment events, int index) {
        return events.get(ValueLayout.JAVA_INT_UNALIGNED, index * SIZE + EVENTS);
    }

    public static int fd(MemorySegment events, int index) {
        return events.get(ValueLayout.JAVA_INT_UNALIGNED, index * SIZE + DATA);
    }
}
