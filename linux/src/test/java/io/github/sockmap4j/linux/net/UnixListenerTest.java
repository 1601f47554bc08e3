package io.github.sockmap4j.linux.net;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * A listener closed while a thread waits in {@code accept} for a long time: the thread returns at
 * once (not at its next wake), the socket file goes, and the descriptor is closed once the thread
 * is out (no root).
 */
class UnixListenerTest {
    private static long openDescriptors() throws IOException {
        try (Stream<Path> fds = Files.list(Path.of("/proc/self/fd"))) {
            return fds.count();
        }
    }

    @Test
    void closingWakesAThreadWaitingInAcceptAndTheDescriptorGoes() throws Exception {
        Path dir = Files.createTempDirectory("sm4j-unix-listener");
        Path at = dir.resolve("l.sock");
        long before = openDescriptors();
        UnixListener l = UnixListener.listen(at);
        CompletableFuture<UnixListener.Connection> accepted = CompletableFuture.supplyAsync(() -> {
            try {
                return l.accept((int) TimeUnit.HOURS.toMillis(1));
            } catch (IOException e) {
                throw new IllegalStateException(e);
            }
        });
        // until the thread is inside accept: a connection made now would be taken, so none is made;
        // the close below must wake a poll that would otherwise last an hour
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!isPolling(l) && System.nanoTime() < deadline) {
            Thread.onSpinWait();
        }
        l.close();
        assertNull(accepted.get(10, TimeUnit.SECONDS), "woken, nothing accepted");
        assertFalse(Files.exists(at), "the socket file was removed");
        assertEquals(before, openDescriptors(), "the listener's descriptor was closed");
        assertNull(l.accept(10), "a closed listener accepts nothing");
        Files.delete(dir);
    }

    private static boolean isPolling(UnixListener l) {
        return Thread.getAllStackTraces().entrySet().stream().anyMatch(e -> java.util.Arrays.stream(e.getValue())
                .anyMatch(f -> f.getMethodName().equals("acceptOpen")));
    }

    @Test
    void aListenerClosedWithNobodyInAcceptClosesItsDescriptorAtOnce() throws Exception {
        Path dir = Files.createTempDirectory("sm4j-unix-listener");
        long before = openDescriptors();
        UnixListener l = UnixListener.listen(dir.resolve("m.sock"));
        assertTrue(openDescriptors() > before);
        l.close();
        assertEquals(before, openDescriptors());
        Files.delete(dir);
    }
}
