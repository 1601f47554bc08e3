package io.github.sockmap4j.kernel;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.testsupport.TestKernel;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The programs load while their loading thread keeps being signalled, as a JVM's thread samplers
 * (JFR, async-profiler) signal it: the verifier gives up with EAGAIN on a pending signal, and under
 * async-profiler sampling every millisecond the agent had failed to load them (and had first taken
 * the failure for a kernel refusing the drain check). Here another thread sends the loading thread
 * SIGPIPE (which the JVM catches and ignores) every 200 µs from before the load to its end.
 */
@Tag("kernel")
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class SignalledLoadTest {
    private static final int SIGPIPE = 13;
    /** A signal every 200 µs: five times as often as async-profiler's 1 ms, which failed every load. */
    private static final long PERIOD_NANOS = 200_000;

    @Test
    @SuppressWarnings("restricted")
    void theProgramsLoadWhileTheLoadingThreadIsSignalled() throws Throwable {
        Linker linker = Linker.nativeLinker();
        MethodHandle gettid = linker.downcallHandle(linker.defaultLookup().find("gettid").orElseThrow(),
                FunctionDescriptor.of(ValueLayout.JAVA_INT));
        MethodHandle tgkill = linker.downcallHandle(linker.defaultLookup().find("tgkill").orElseThrow(),
                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT,
                        ValueLayout.JAVA_INT));
        int pid = (int) ProcessHandle.current().pid();
        CompletableFuture<Integer> loader = new CompletableFuture<>();
        CompletableFuture<Void> signalling = new CompletableFuture<>();
        CompletableFuture<Void> loaded = new CompletableFuture<>();
        AtomicBoolean done = new AtomicBoolean();
        AtomicLong sent = new AtomicLong();
        Thread load = new Thread(() -> {
            try {
                loader.complete((int) gettid.invokeExact());
                signalling.get(30, TimeUnit.SECONDS);
                try (TestKernel k = TestKernel.start("signalled")) {
                    assertTrue(k.sockmap.isActive(), k.sockmap::unavailabilityCause);
                }
                loaded.complete(null);
            } catch (Throwable t) {
                loaded.completeExceptionally(t);
            } finally {
                done.set(true);
            }
        }, "signalled-loader");
        Thread signaller = new Thread(() -> {
            try {
                int tid = loader.get(30, TimeUnit.SECONDS);
                signalling.complete(null);
                while (!done.get()) {
                    if ((int) tgkill.invokeExact(pid, tid, SIGPIPE) == 0) {
                        sent.incrementAndGet();
                    }
                    java.util.concurrent.locks.LockSupport.parkNanos(PERIOD_NANOS);
                }
            } catch (Throwable t) {
                signalling.completeExceptionally(t);
            }
        }, "signaller");
        signaller.start();
        load.start();
        try {
            loaded.get(60, TimeUnit.SECONDS);
        } finally {
            done.set(true);
            signaller.join();
            load.join();
        }
        System.out.println("signalled load: " + sent.get() + " signals sent to the loading thread during the load");
        assertTrue(sent.get() > 10, "the loading thread was signalled during its load: " + sent.get());
    }
}
