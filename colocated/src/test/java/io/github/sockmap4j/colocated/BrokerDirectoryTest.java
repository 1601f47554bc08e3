package io.github.sockmap4j.colocated;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.linux.ffi.LibC;
import io.github.sockmap4j.linux.ffi.Linux;
import io.github.sockmap4j.linux.ffi.SysCalls;
import io.github.sockmap4j.linux.net.NativeSocket;
import io.github.sockmap4j.linux.net.Sockets;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.SecureRandom;
import java.time.Duration;
import java.time.Instant;
import java.util.Comparator;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A broker directory (no root, but for the case of a directory of another user): a listener's
 * socket there takes offers for the listener's expectations, and its socket and lock go when it
 * closes; what a listener that died left is swept, what a live one has is not; a directory another
 * user could write into without the sticky bit, a file, a link and a name that would leave the
 * directory are each refused, saying what to do.
 */
class BrokerDirectoryTest {
    private static final long CAPACITY = 8192;
    private static final Duration TIMEOUT = Duration.ofSeconds(10);
    private static final SecureRandom RANDOM = new SecureRandom();
    private Path base;

    @BeforeEach
    void base() throws IOException {
        base = Files.createTempDirectory("sm4j-broker");
    }

    @AfterEach
    void removeBase() throws IOException {
        try (Stream<Path> files = Files.walk(base)) {
            for (Path p : files.sorted(Comparator.reverseOrder()).toList()) {
                Files.delete(p);
            }
        }
    }

    private static byte[] nonce() {
        byte[] n = new byte[16];
        RANDOM.nextBytes(n);
        return n;
    }

    private static String[] names(Path dir) throws IOException {
        try (Stream<Path> s = Files.list(dir)) {
            return s.map(p -> p.getFileName().toString()).sorted().toArray(String[]::new);
        }
    }

    /** A socket file whose listener is gone, as a process that died leaves it. */
    private static void leftSocket(Path at) throws IOException {
        NativeSocket s = NativeSocket.newUnixStream();
        try (Arena a = Arena.ofConfined()) {
            s.bind(Sockets.encodeUnix(a, at));
        } finally {
            s.closeNow();
        }
    }

    @Test
    void anOfferAtTheDirectorysSocketReachesTheListenerAndClosingLeavesNothing() throws Exception {
        BrokerDirectory d = BrokerDirectory.prepare(base.resolve("made"));
        assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(d.path())),
                "a directory it makes is this user's alone");
        byte[] nonce = nonce();
        try (Handover.Listener l = Handover.Listener.listen(Path.of("@sm4j-broker-test-" + RANDOM.nextLong()));
             BrokerDirectory.Placed p = d.place(l, BrokerDirectory.PREFIX + "t1");
             SharedRegion mine = SharedRegion.create("sm4j-broker-test", CAPACITY)) {
            assertEquals(d.socketFor(BrokerDirectory.PREFIX + "t1"), p.socket());
            assertTrue(Files.exists(p.socket(), LinkOption.NOFOLLOW_LINKS));
            CompletableFuture<Handover.Received> expected = l.expect(nonce, CAPACITY); // made with the abstract one
            CompletableFuture<Boolean> accepted = CompletableFuture.supplyAsync(() -> {
                try {
                    return p.listener().acceptOne(TIMEOUT);
                } catch (IOException e) {
                    throw new IllegalStateException(e);
                }
            });
            Handover.offer(p.socket(), nonce, mine, TIMEOUT);
            assertTrue(accepted.get(10, TimeUnit.SECONDS));
            expected.get(10, TimeUnit.SECONDS).region().close();
            assertEquals(0, d.sweep(), "a live listener's socket is not swept");
            assertEquals(2, names(d.path()).length, "its socket and its lock");
        }
        assertEquals(0, names(d.path()).length, "closing removed both");
    }

    @Test
    void aPlacedSocketKnowsWhetherItIsStillThere() throws Exception {
        BrokerDirectory d = BrokerDirectory.prepare(base.resolve("found"));
        try (Handover.Listener l = Handover.Listener.listen(Path.of("@sm4j-broker-test-" + RANDOM.nextLong()));
             BrokerDirectory.Placed p = d.place(l, BrokerDirectory.PREFIX + "f")) {
            assertEquals(BrokerDirectory.Found.OURS, p.found());
            Files.delete(p.socket());
            assertEquals(BrokerDirectory.Found.GONE, p.found());
            leftSocket(p.socket()); // someone else's socket at its path
            assertEquals(BrokerDirectory.Found.REPLACED, p.found());
        }
        assertEquals(0, names(d.path()).length, "closing removed the lock, and the file at the socket's path");
    }

    @Test
    void whatAListenerThatDiedLeftIsSweptAndNothingElse() throws Exception {
        BrokerDirectory d = BrokerDirectory.prepare(base.resolve("swept"));
        // a listener that died: its socket, and its lock that nobody holds any more
        String dead = BrokerDirectory.PREFIX + "dead";
        leftSocket(d.socketFor(dead));
        int fd = SysCalls.open(d.path().resolve(dead + ".lock").toString(), Linux.O_RDWR | Linux.O_CREAT, 0600);
        assertEquals(0, SysCalls.tryFlock(fd, Linux.LOCK_EX | Linux.LOCK_NB));
        LibC.close(fd); // as its process's end releases it
        // a socket without a lock: an hour old (left behind), and a new one (its listener is about to lock)
        String old = BrokerDirectory.PREFIX + "old";
        leftSocket(d.socketFor(old));
        Files.setLastModifiedTime(d.socketFor(old), FileTime.from(Instant.now().minus(Duration.ofHours(1))));
        String fresh = BrokerDirectory.PREFIX + "fresh";
        leftSocket(d.socketFor(fresh));
        // a file that is not one of ours
        Files.writeString(d.path().resolve("someone-elses.txt"), "kept");
        try (Handover.Listener l = Handover.Listener.listen(Path.of("@sm4j-broker-test-" + RANDOM.nextLong()));
             BrokerDirectory.Placed live = d.place(l, BrokerDirectory.PREFIX + "live")) {
            assertEquals(2, d.sweep(), "the dead listener's socket and the old lockless one");
            assertEquals(java.util.List.of(BrokerDirectory.PREFIX + "fresh.sock", BrokerDirectory.PREFIX + "live.lock",
                    BrokerDirectory.PREFIX + "live.sock", "someone-elses.txt"), java.util.List.of(names(d.path())));
            assertTrue(Files.exists(live.socket(), LinkOption.NOFOLLOW_LINKS));
        }
        Files.delete(d.socketFor(fresh));
        Files.delete(d.path().resolve("someone-elses.txt"));
    }

    @Test
    void aDirectoryOthersCouldWriteIntoIsRefusedUnlessSticky() throws Exception {
        Path open = Files.createDirectory(base.resolve("open"));
        Files.setPosixFilePermissions(open, PosixFilePermissions.fromString("rwxrwxrwx"));
        IOException e = assertThrows(IOException.class, () -> BrokerDirectory.prepare(open));
        assertTrue(e.getMessage().contains("writable by others") && e.getMessage().contains("+t"), e.getMessage());
        Path groupOnly = Files.createDirectory(base.resolve("group"));
        Files.setPosixFilePermissions(groupOnly, PosixFilePermissions.fromString("rwxrwx---"));
        assertThrows(IOException.class, () -> BrokerDirectory.prepare(groupOnly));
        // sticky (as /tmp): each may remove only its own files
        Files.setAttribute(open, "unix:mode", 01777);
        BrokerDirectory.prepare(open);
    }

    @Test
    void aFileALinkAndANameThatLeavesTheDirectoryAreRefused() throws Exception {
        Path file = Files.writeString(base.resolve("file"), "x");
        IOException notDir = assertThrows(IOException.class, () -> BrokerDirectory.prepare(file));
        assertTrue(notDir.getMessage().contains("not a directory"), notDir.getMessage());
        Path real = Files.createDirectory(base.resolve("real"));
        Path link = Files.createSymbolicLink(base.resolve("link"), real);
        assertThrows(IOException.class, () -> BrokerDirectory.prepare(link));
        BrokerDirectory d = BrokerDirectory.prepare(real);
        for (String bad : new String[] {"../x", "a/b", ".hidden", "", "@x", "x".repeat(101)}) {
            assertThrows(IllegalArgumentException.class, () -> d.socketFor(bad), bad);
        }
        assertFalse(d.socketFor("ok-1.x").toString().contains(".."));
    }

    @Test
    void aDirectoryOfAnotherUserIsRefused() throws Exception {
        Assumptions.assumeTrue(SysCalls.geteuid() == 0, "making a directory of another user needs root");
        Path theirs = Files.createDirectory(base.resolve("theirs"));
        Files.setAttribute(theirs, "unix:uid", 65534);
        IOException e = assertThrows(IOException.class, () -> BrokerDirectory.prepare(theirs));
        assertTrue(e.getMessage().contains("belongs to uid 65534"), e.getMessage());
    }
}
