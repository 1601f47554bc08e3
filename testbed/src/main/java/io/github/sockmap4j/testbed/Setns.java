package io.github.sockmap4j.testbed;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * Moves the calling thread (only it) into a named network namespace: open(2) of
 * {@code /run/netns/NAME}, setns(2), close(2). The test bed's only native calls (it depends on no
 * sockmap4j code); errno is not read: a failure names the namespace and the call.
 */
@SuppressWarnings("restricted")
final class Setns {
    private static final int O_RDONLY_CLOEXEC = 0x80000;
    private static final int CLONE_NEWNET = 0x40000000;
    private static final Linker LINKER = Linker.nativeLinker();
    private static final MethodHandle OPEN = handle("open",
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_INT));
    private static final MethodHandle SETNS = handle("setns",
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));
    private static final MethodHandle CLOSE = handle("close",
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));

    private Setns() {
    }

    private static MethodHandle handle(String name, FunctionDescriptor fd) {
        return LINKER.downcallHandle(LINKER.defaultLookup().find(name).orElseThrow(), fd);
    }

    static void enter(String ns) throws IOException {
        try (Arena arena = Arena.ofConfined()) {
            int fd = (int) OPEN.invokeExact(arena.allocateFrom("/run/netns/" + ns), O_RDONLY_CLOEXEC);
            if (fd < 0) {
                throw new IOException("cannot open /run/netns/" + ns + ": is it a namespace of ip netns?");
            }
            try {
                if ((int) SETNS.invokeExact(fd, CLONE_NEWNET) != 0) {
                    throw new IOException("setns into " + ns + " failed (it needs CAP_SYS_ADMIN)");
                }
            } finally {
                int ignored = (int) CLOSE.invokeExact(fd);
            }
        } catch (IOException | RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }
}
