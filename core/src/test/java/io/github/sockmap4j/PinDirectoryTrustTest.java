package io.github.sockmap4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.linux.bpf.LockDir;
import io.github.sockmap4j.testbed.ChildJvm;
import io.github.sockmap4j.testsupport.TestKernel;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/**
 * An unprivileged user (uid {@value #USER}, no capabilities) against the pin directory: racing
 * root for it the moment the lock directory appears, owning a directory above it, and a pin
 * directory outside bpffs. Each time, sockmap4j either owns what it uses or refuses with a
 * message, and leaves nothing behind.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 300, unit = TimeUnit.SECONDS)
@Tag("kernel")
class PinDirectoryTrustTest {
    static final int USER = 4001;
    static final int ROUNDS = 25;
    Path cgroup;
    Path bin;

    @BeforeAll
    void start() throws IOException, InterruptedException {
        cgroup = TestKernel.newCgroup("trust");
        // A place uid 4001 may run the racer from (the build tree may sit under /root).
        bin = Files.createTempDirectory("sm4j-racer", PosixFilePermissions.asFileAttribute(
                PosixFilePermissions.fromString("rwxr-xr-x")));
        ChildJvm.compileC("src/test/c/dir_racer.c", bin.resolve("dir_racer"));
    }

    @AfterAll
    void stop() throws IOException {
        if (cgroup != null) {
            Files.deleteIfExists(cgroup);
        }
        if (bin != null) {
            Files.deleteIfExists(bin.resolve("dir_racer"));
            Files.deleteIfExists(bin);
        }
    }

    private Sockmap open(Path pinDir) {
        return Sockmap.open(SockmapConfig.fromSystemProperties().withPinDirectory(pinDir).withCgroup(cgroup)
                .withRequired(false));
    }

    private static int uid(Path p) throws IOException {
        return (Integer) Files.getAttribute(p, "unix:uid", LinkOption.NOFOLLOW_LINKS);
    }

    /** Removes what a round left: the attacker's directory, or pins of an open that won. */
    private static void removeAll(Path dir) throws IOException {
        if (Files.isDirectory(dir, LinkOption.NOFOLLOW_LINKS)) {
            TestKernel.removePins(dir);
            Files.deleteIfExists(dir);
        }
        try (var s = Files.list(LockDir.pathFor(dir).getParent())) {
            assertTrue(s.noneMatch(p -> p.equals(LockDir.pathFor(dir))), "lock directory left for " + dir);
        } catch (java.nio.file.NoSuchFileException none) {
            // No lock base at all.
        }
    }

    @Test
    void aUserWhoMakesThePinDirectoryWhenTheLockDirectoryAppearsIsRefused() throws Exception {
        int won = 0;
        int refused = 0;
        for (int round = 0; round < ROUNDS; round++) {
            Path pinDir = Path.of("/sys/fs/bpf", TestKernel.uniqueName("race"));
            Path lockDir = LockDir.pathFor(pinDir);
            try (ChildJvm racer = ChildJvm.start(List.of("setpriv", "--reuid=" + USER, "--regid=" + USER,
                    "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", bin.resolve("dir_racer").toString(),
                    lockDir.toString(), pinDir.toString(), "20"))) {
                racer.expect("ready=", 30);
                Sockmap s = open(pinDir);
                try {
                    String outcome = racer.expect("", 30); // its verdict: won=1, lost=ERRNO or timeout=1
                    boolean attackerWon = outcome.contains("won=1");
                    if (s.kernelOpen()) {
                        // The open went through: the directory and every pin in it are root's.
                        assertFalse(attackerWon, "opened although uid " + USER + " made " + pinDir + ": " + outcome);
                        assertEquals(0, uid(pinDir), "owner of " + pinDir);
                        assertEquals("rwxr-x---", PosixFilePermissions.toString(Files.getPosixFilePermissions(pinDir,
                                LinkOption.NOFOLLOW_LINKS)));
                        try (var pins = Files.list(pinDir)) {
                            for (Path p : (Iterable<Path>) pins::iterator) {
                                assertEquals(0, uid(p), "owner of " + p);
                            }
                        }
                    } else {
                        assertTrue(attackerWon, "refused although uid " + USER + " lost the race (" + outcome + "): "
                                + s.unavailabilityCause());
                        assertTrue(s.unavailabilityCause().contains("refusing the pin directory " + pinDir)
                                && s.unavailabilityCause().contains("uid " + USER), s.unavailabilityCause());
                        try (var pins = Files.list(pinDir)) {
                            assertEquals(0, pins.count(), "nothing pinned in the user's directory");
                        }
                        refused++;
                    }
                    won += attackerWon ? 1 : 0;
                } finally {
                    s.close();
                    removeAll(pinDir);
                }
            }
        }
        System.out.printf("pin directory race: uid %d made the directory first in %d of %d rounds, refused %d%n", USER,
                won, ROUNDS, refused);
    }

    @Test
    void aDirectoryAboveThePinDirectoryThatAUserOwnsIsRefused() throws Exception {
        Path owned = Path.of("/sys/fs/bpf", TestKernel.uniqueName("owned"));
        Files.createDirectory(owned);
        try {
            Files.setOwner(owned, owned.getFileSystem().getUserPrincipalLookupService()
                    .lookupPrincipalByName(Integer.toString(USER)));
            Path pinDir = owned.resolve("pins");
            Sockmap s = open(pinDir);
            try {
                assertFalse(s.kernelOpen());
                assertTrue(s.unavailabilityCause().contains("refusing the pin directory " + pinDir + ": " + owned
                        + ", above it, is owned by uid " + USER), s.unavailabilityCause());
                assertFalse(Files.exists(pinDir), "nothing made below the user's directory");
                assertFalse(Files.exists(LockDir.pathFor(pinDir)), "no lock directory for a refused pin directory");
            } finally {
                s.close();
            }
        } finally {
            removeAll(owned.resolve("pins"));
            Files.deleteIfExists(owned);
        }
    }

    @Test
    void aPinDirectoryOutsideBpffsIsRefusedBeforeAnythingIsMade() throws Exception {
        Path tmp = Files.createTempDirectory("sm4j-notbpf");
        Path pinDir = tmp.resolve("pins");
        try {
            Sockmap s = open(pinDir);
            try {
                assertFalse(s.kernelOpen());
                assertTrue(s.unavailabilityCause().contains("is not on a BPF file system"), s.unavailabilityCause());
                assertFalse(Files.exists(pinDir));
                assertFalse(Files.exists(LockDir.pathFor(pinDir)), "no lock directory for a refused pin directory");
            } finally {
                s.close();
            }
        } finally {
            Files.deleteIfExists(tmp);
        }
    }

    @Test
    void aCgroupThatIsNotCgroupV2IsRefusedByName() throws Exception {
        Path plain = Files.createTempDirectory("sm4j-not-a-cgroup");
        Path pinDir = Path.of("/sys/fs/bpf", TestKernel.uniqueName("v1"));
        try {
            Sockmap s = Sockmap.open(SockmapConfig.fromSystemProperties().withPinDirectory(pinDir).withCgroup(plain)
                    .withRequired(false));
            try {
                assertFalse(s.kernelOpen());
                assertTrue(s.unavailabilityCause().contains(plain.toString())
                        && s.unavailabilityCause().contains("cgroup v2"), s.unavailabilityCause());
                assertFalse(Files.exists(pinDir), "nothing made for it");
                assertFalse(Files.exists(LockDir.pathFor(pinDir)), "no lock directory for it");
            } finally {
                s.close();
            }
        } finally {
            Files.deleteIfExists(plain);
        }
    }

    @Test
    void aWorldWritableLockBaseIsRefused() throws Exception {
        Path base = Files.createTempDirectory("sm4j-locks");
        Files.setPosixFilePermissions(base, PosixFilePermissions.fromString("rwxrwxrwx"));
        String before = System.getProperty("sockmap4j.lockDir");
        System.setProperty("sockmap4j.lockDir", base.toString());
        Path pinDir = Path.of("/sys/fs/bpf", TestKernel.uniqueName("lockbase"));
        try {
            Sockmap s = open(pinDir);
            try {
                assertFalse(s.kernelOpen());
                assertTrue(s.unavailabilityCause().contains("refusing the lock directory " + base)
                        && s.unavailabilityCause().contains("writable by every user"), s.unavailabilityCause());
            } finally {
                s.close();
            }
        } finally {
            if (before == null) {
                System.clearProperty("sockmap4j.lockDir");
            } else {
                System.setProperty("sockmap4j.lockDir", before);
            }
            Files.deleteIfExists(pinDir);
            Files.deleteIfExists(base);
        }
    }
}
