package io.github.sockmap4j.colocated;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.linux.ffi.FdPassing;
import io.github.sockmap4j.linux.ffi.LibC;
import io.github.sockmap4j.linux.ffi.SharedMemory;
import io.github.sockmap4j.linux.net.NativeSocket;
import io.github.sockmap4j.linux.net.UnixListener;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The hand-over of a region between the two ends of a connection, and what it refuses (no root):
 * a listener that cannot prove the nonce gets no descriptor, an offer without it maps nothing, an
 * offer of a file that is not a sealed region is refused, and nothing refused leaves a descriptor.
 */
class HandoverTest {
    private static final long CAPACITY = 8192;
    private static final Duration TIMEOUT = Duration.ofSeconds(10);
    private static final SecureRandom RANDOM = new SecureRandom();
    private Path dir;

    @BeforeEach
    void dir() throws IOException {
        dir = Files.createTempDirectory("sm4j-handover");
    }

    @AfterEach
    void removeDir() throws IOException {
        try (Stream<Path> files = Files.list(dir)) {
            for (Path p : files.toList()) {
                Files.delete(p);
            }
        }
        Files.delete(dir);
    }

    private static byte[] nonce() {
        byte[] n = new byte[16];
        RANDOM.nextBytes(n);
        return n;
    }

    private static long openDescriptors() throws IOException {
        try (Stream<Path> fds = Files.list(Path.of("/proc/self/fd"))) {
            return fds.count();
        }
    }

    private static CompletableFuture<Boolean> acceptOne(Handover.Listener l) {
        return CompletableFuture.supplyAsync(() -> {
            try {
                return l.acceptOne(TIMEOUT);
            } catch (IOException e) {
                throw new IllegalStateException(e);
            }
        });
    }

    @Test
    void theOtherEndMapsTheRegionAndBothTalk() throws Exception {
        byte[] nonce = nonce();
        try (Handover.Listener l = Handover.Listener.listen(dir.resolve("colocated.sock"));
             SharedRegion mine = SharedRegion.create("sm4j-test", CAPACITY)) {
            CompletableFuture<Handover.Received> expected = l.expect(nonce, CAPACITY);
            CompletableFuture<Boolean> accepted = acceptOne(l);
            Handover.offer(l.path(), nonce, mine, TIMEOUT);
            assertTrue(accepted.get(10, TimeUnit.SECONDS));
            Handover.Received got = expected.get(10, TimeUnit.SECONDS);
            try (SharedRegion theirs = got.region()) {
                assertEquals(ProcessHandle.current().pid(), got.pid());
                MemorySegment ping = Arena.ofAuto().allocateFrom("ping");
                assertTrue(mine.outbound().writer().offer(1, ping, 0, (int) ping.byteSize()));
                StringBuilder s = new StringBuilder();
                assertEquals(1, theirs.inbound().reader().poll((k, m) -> s.append(k).append(m.getString(0)), 4));
                assertEquals("1ping", s.toString());
            }
        }
    }

    /** A region made with bells reaches the listener with them: its reader may wait on its ring's bell. */
    @Test
    void aRegionsBellsGoWithIt() throws Exception {
        byte[] nonce = nonce();
        try (Handover.Listener l = Handover.Listener.listen(dir.resolve("colocated.sock"));
             SharedRegion mine = SharedRegion.create("sm4j-test", CAPACITY, 0, true)) {
            CompletableFuture<Handover.Received> expected = l.expect(nonce, CAPACITY);
            CompletableFuture<Boolean> accepted = acceptOne(l);
            Handover.offer(l.path(), nonce, mine, TIMEOUT);
            assertTrue(accepted.get(10, TimeUnit.SECONDS));
            try (SharedRegion theirs = expected.get(10, TimeUnit.SECONDS).region()) {
                assertTrue(theirs.inbound().bell() >= 0 && theirs.outbound().bell() >= 0, "both rings have their bells");
                assertEquals(2, theirs.bells().length);
            }
        }
    }

    /**
     * A listener of version 1, which refuses the offer of version 2 that carries bells, gets the
     * region again as version 1: the descriptor alone, so the two ends still share the rings.
     */
    @Test
    void aListenerOfVersion1GetsTheRegionWithoutItsBells() throws Exception {
        byte[] nonce = nonce();
        try (UnixListener old = UnixListener.listen(dir.resolve("colocated.sock"));
             SharedRegion mine = SharedRegion.create("sm4j-test", CAPACITY, 0, true)) {
            CompletableFuture<String> seen = CompletableFuture.supplyAsync(() -> {
                StringBuilder said = new StringBuilder();
                try {
                    try (UnixListener.Connection c = old.accept()) {
                        said.append(c.readLine(256).split(" ")[1]);
                        c.writeLine("NO not a co-located hand-over of version 1");
                    }
                    try (UnixListener.Connection c = old.accept()) {
                        said.append(' ').append(c.readLine(256).split(" ")[1]);
                        c.writeLine("PROOF " + Handover.proof(nonce, "listener"));
                        UnixListener.Connection.LineAndFds got = c.readLineAndFds(256, 5_000, 8);
                        said.append(' ').append(got.fds().length).append(" descriptor(s)");
                        for (int fd : got.fds()) {
                            LibC.close(fd);
                        }
                        c.writeLine("OK");
                    }
                } catch (IOException e) {
                    said.append(" failed: ").append(e.getMessage());
                }
                return said.toString();
            });
            Handover.offer(old.path(), nonce, mine, TIMEOUT);
            assertEquals("2 1 1 descriptor(s)", seen.get(10, TimeUnit.SECONDS),
                    "offered as version 2, then as version 1 with the region alone");
        }
    }

    /** Whoever listens where the offerer goes but is not the other end cannot prove it, and gets nothing. */
    @Test
    void aListenerThatCannotProveTheConnectionGetsNoDescriptor() throws Exception {
        try (UnixListener impostor = UnixListener.listen(dir.resolve("colocated.sock"));
             SharedRegion mine = SharedRegion.create("sm4j-test", CAPACITY)) {
            CompletableFuture<String> taken = CompletableFuture.supplyAsync(() -> {
                try (UnixListener.Connection c = impostor.accept()) {
                    c.readLine(256);
                    c.writeLine("PROOF " + "00".repeat(32));
                    UnixListener.Connection.LineAndFd got = c.readLineAndFd(256, 5_000);
                    if (got.fd() < 0) {
                        return "nothing: a line without a descriptor";
                    }
                    LibC.close(got.fd());
                    return "a descriptor";
                } catch (IOException e) {
                    return "nothing: " + e.getMessage();
                }
            });
            IOException e = assertThrows(IOException.class, () -> Handover.offer(impostor.path(), nonce(), mine, TIMEOUT));
            assertTrue(e.getMessage().contains("not the other end"), e.getMessage());
            assertTrue(taken.get(10, TimeUnit.SECONDS).startsWith("nothing"), taken.get());
        }
    }

    @Test
    void anOfferForAConnectionNotExpectedIsRefused() throws Exception {
        byte[] nonce = nonce();
        try (Handover.Listener l = Handover.Listener.listen(dir.resolve("colocated.sock"));
             SharedRegion mine = SharedRegion.create("sm4j-test", CAPACITY)) {
            CompletableFuture<Handover.Received> expected = l.expect(nonce, CAPACITY);
            CompletableFuture<Boolean> accepted = acceptOne(l);
            IOException e = assertThrows(IOException.class, () -> Handover.offer(l.path(), nonce(), mine, TIMEOUT));
            assertTrue(e.getMessage().contains("not the other end"), e.getMessage());
            assertFalse(accepted.get(10, TimeUnit.SECONDS));
            assertFalse(expected.isDone(), "the expected connection still waits for its own offer");
        }
    }

    /**
     * One who learned a connection's name (it is all an offer says in the clear) and replays the
     * listener's proof as its own: refused, the expectation failed, no descriptor taken.
     */
    @Test
    void anOfferThatKnowsTheNameButNotTheNonceIsRefused() throws Exception {
        byte[] nonce = nonce();
        long before = openDescriptors();
        try (Handover.Listener l = Handover.Listener.listen(dir.resolve("colocated.sock"))) {
            CompletableFuture<Handover.Received> expected = l.expect(nonce, CAPACITY);
            CompletableFuture<Boolean> accepted = acceptOne(l);
            try (Raw raw = new Raw(l.path())) {
                raw.line(Handover.HELLO + " 1 " + Handover.id(nonce) + " " + CAPACITY);
                String proof = raw.read();
                assertTrue(proof.startsWith("PROOF "), proof);
                raw.line("REGION " + proof.substring(6));
                assertTrue(raw.read().startsWith("NO "));
            }
            assertFalse(accepted.get(10, TimeUnit.SECONDS));
            ExecutionException e = assertThrows(ExecutionException.class, () -> expected.get(10, TimeUnit.SECONDS));
            assertTrue(e.getCause().getMessage().contains("did not prove"), e.getCause().getMessage());
        }
        assertEquals(before, openDescriptors());
    }

    /** The other end, but the file it hands over could shrink under the mapping: refused, closed. */
    @Test
    void anUnsealedFileIsRefusedAndClosed() throws Exception {
        byte[] nonce = nonce();
        long before = openDescriptors();
        try (Handover.Listener l = Handover.Listener.listen(dir.resolve("colocated.sock"))) {
            CompletableFuture<Handover.Received> expected = l.expect(nonce, CAPACITY);
            CompletableFuture<Boolean> accepted = acceptOne(l);
            int unsealed = SharedMemory.create("sm4j-test", SharedRegion.sizeFor(CAPACITY), 0);
            try (Raw raw = new Raw(l.path())) {
                raw.line(Handover.HELLO + " 1 " + Handover.id(nonce) + " " + CAPACITY);
                assertEquals("PROOF " + Handover.proof(nonce, "listener"), raw.read());
                raw.lineWithFds("REGION " + Handover.proof(nonce, "offerer"), unsealed);
                String answer = raw.read();
                assertTrue(answer.startsWith("NO ") && answer.contains("not sealed"), answer);
            } finally {
                LibC.close(unsealed);
            }
            assertFalse(accepted.get(10, TimeUnit.SECONDS));
            assertTrue(expected.isCompletedExceptionally());
        }
        assertEquals(before, openDescriptors(), "the refused descriptor was closed");
    }

    /** An offerer that sends several descriptors with its proof: one is mapped, every other closed. */
    @Test
    void extraDescriptorsAreClosed() throws Exception {
        long before = openDescriptors();
        try (Handover.Listener l = Handover.Listener.listen(dir.resolve("colocated.sock"));
             SharedRegion region = SharedRegion.create("sm4j-test", CAPACITY)) {
            byte[] nonce = nonce();
            CompletableFuture<Handover.Received> expected = l.expect(nonce, CAPACITY);
            CompletableFuture<Boolean> accepted = acceptOne(l);
            try (Raw raw = new Raw(l.path())) {
                raw.line(Handover.HELLO + " 1 " + Handover.id(nonce) + " " + CAPACITY);
                raw.read();
                raw.lineWithFds("REGION " + Handover.proof(nonce, "offerer"), region.fd(), region.fd(), region.fd());
                assertEquals("OK", raw.read());
            }
            assertTrue(accepted.get(10, TimeUnit.SECONDS));
            expected.get(10, TimeUnit.SECONDS).region().close();
        }
        assertEquals(before, openDescriptors(), "the two extra descriptors were closed");
    }

    /** A peer that speaks the protocol by hand. */
    private static final class Raw implements AutoCloseable {
        private final NativeSocket s;
        private final Arena arena = Arena.ofConfined();
        private final MemorySegment one = arena.allocate(1);

        Raw(Path path) throws IOException {
            s = NativeSocket.connectUnix(path);
        }

        void line(String line) {
            MemorySegment out = arena.allocateFrom(ValueLayout.JAVA_BYTE, (line + "\n").getBytes(StandardCharsets.US_ASCII));
            assertEquals(out.byteSize(), s.send(out, 0));
        }

        String read() {
            StringBuilder b = new StringBuilder();
            while (s.recv(one, 0) == 1 && one.get(ValueLayout.JAVA_BYTE, 0) != '\n') {
                b.append((char) one.get(ValueLayout.JAVA_BYTE, 0));
            }
            return b.toString();
        }

        void lineWithFds(String line, int... fds) {
            MemorySegment out = arena.allocateFrom(ValueLayout.JAVA_BYTE, (line + "\n").getBytes(StandardCharsets.US_ASCII));
            assertEquals(out.byteSize(), FdPassing.trySendFds(s.intValue(), out, fds));
        }

        @Override
        public void close() {
            s.closeNow();
            arena.close();
        }
    }

    @Test
    void anAbstractNameWorksAndLeavesNoFile() throws Exception {
        byte[] nonce = nonce();
        Path name = Path.of("@sm4j-handover-test-" + ProcessHandle.current().pid() + "-" + System.nanoTime());
        try (Handover.Listener l = Handover.Listener.listen(name);
             SharedRegion mine = SharedRegion.create("sm4j-test", CAPACITY)) {
            assertFalse(Files.exists(name), "no file for an abstract name");
            CompletableFuture<Handover.Received> expected = l.expect(nonce, CAPACITY);
            CompletableFuture<Boolean> accepted = acceptOne(l);
            Handover.offer(l.path(), nonce, mine, TIMEOUT);
            assertTrue(accepted.get(10, TimeUnit.SECONDS));
            expected.get(10, TimeUnit.SECONDS).region().close();
        }
        // gone with its listener: nothing listens there now
        try (SharedRegion mine = SharedRegion.create("sm4j-test", CAPACITY)) {
            assertThrows(Handover.NoListenerException.class, () -> Handover.offer(name, nonce(), mine, TIMEOUT));
        }
    }

    @Test
    void anOffererTheRuleDoesNotAllowIsRefusedAfterItsProofAndMapsNothing() throws Exception {
        byte[] nonce = nonce();
        try (Handover.Listener l = Handover.Listener.listen(dir.resolve("colocated.sock"));
             SharedRegion mine = SharedRegion.create("sm4j-test", CAPACITY)) {
            long before = openDescriptors();
            int own = Handover.ownUid();
            CompletableFuture<Handover.Received> expected = l.expect(nonce, CAPACITY, uid -> uid != own);
            CompletableFuture<Boolean> accepted = acceptOne(l);
            Handover.RefusedException e = assertThrows(Handover.RefusedException.class,
                    () -> Handover.offer(l.path(), nonce, mine, TIMEOUT));
            assertTrue(e.reason().startsWith("not allowed"), e.reason());
            assertFalse(accepted.get(10, TimeUnit.SECONDS));
            ExecutionException failed = assertThrows(ExecutionException.class, () -> expected.get(10, TimeUnit.SECONDS));
            assertTrue(failed.getCause() instanceof Handover.NotAllowedException, failed.toString());
            assertEquals(before, openDescriptors(), "the refused descriptor is closed");
        }
    }
}
