package io.github.sockmap4j.linux.ffi;

import static io.github.sockmap4j.linux.ffi.Native.C_INT;
import static io.github.sockmap4j.linux.ffi.Native.C_LONG;
import static io.github.sockmap4j.linux.ffi.Native.C_PTR;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * libbpf's messages (the verifier's log among them) into SLF4J's {@code io.github.sockmap4j.libbpf}
 * logger, through libbpf's print callback; installed when a process first loads or attaches.
 */
@SuppressWarnings("restricted")
public final class LibbpfLog {
    private static final Logger LOG = LoggerFactory.getLogger("io.github.sockmap4j.libbpf");

    private LibbpfLog() {
    }

    /*
     * libbpf prints to stderr unless told otherwise; its messages (the verifier log among
     * them) go to SLF4J instead. The callback gets a va_list, which vsnprintf formats.
     */
    private static MethodHandle vsnprintf;
    /** Set on a thread whose load may fail as expected (a first try with a fallback): warnings go to DEBUG. */
    private static final ThreadLocal<Boolean> EXPECTING_FAILURE = ThreadLocal.withInitial(() -> false);

    /**
     * Runs {@code load} with libbpf's warnings (the verifier's log of a refused program among
     * them) at DEBUG rather than WARN: for a first try whose failure the caller handles and
     * reports itself.
     */
    public static <T, E extends Exception> T expectingFailure(ThrowingSupplier<T, E> load) throws E {
        boolean was = EXPECTING_FAILURE.get();
        EXPECTING_FAILURE.set(true);
        try {
            return load.get();
        } finally {
            EXPECTING_FAILURE.set(was);
        }
    }

    /** A supplier that may throw {@code E}. */
    @FunctionalInterface
    public interface ThrowingSupplier<T, E extends Exception> {
        T get() throws E;
    }

    static void install(SymbolLookup lib) {
        try {
            vsnprintf = Native.plain(Native.LINKER.defaultLookup(), "vsnprintf",
                    FunctionDescriptor.of(C_INT, C_PTR, C_LONG, C_PTR, C_PTR));
            MethodHandle target = MethodHandles.lookup().findStatic(LibbpfLog.class, "print",
                    MethodType.methodType(int.class, int.class, MemorySegment.class, MemorySegment.class));
            MemorySegment stub = Native.LINKER.upcallStub(target,
                    FunctionDescriptor.of(C_INT, C_INT, C_PTR, C_PTR), Arena.global());
            MethodHandle setPrint = Native.plain(lib, "libbpf_set_print", FunctionDescriptor.of(C_PTR, C_PTR));
            MemorySegment previous = (MemorySegment) setPrint.invokeExact(stub);
            assert previous != null;
        } catch (Throwable t) {
            LOG.debug("libbpf messages stay on stderr: {}", t.toString());
        }
    }

    private static int print(int level, MemorySegment format, MemorySegment args) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment buf = arena.allocate(4096);
            int n = (int) vsnprintf.invokeExact(buf, 4096L, format.reinterpret(Long.MAX_VALUE), args);
            if (n > 0) {
                String msg = buf.getString(0).stripTrailing();
                if (level == 0 && !EXPECTING_FAILURE.get()) {
                    LOG.warn("{}", msg);
                } else {
                    LOG.debug("{}", msg);
                }
            }
        } catch (Throwable t) {
            // An upcall must not throw: the JVM would exit.
            return 0;
        }
        return 0;
    }
}
