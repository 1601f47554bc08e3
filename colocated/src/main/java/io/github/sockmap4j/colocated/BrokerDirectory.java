package io.github.sockmap4j.colocated;

import io.github.sockmap4j.linux.ffi.Errno;
import io.github.sockmap4j.linux.ffi.LibC;
import io.github.sockmap4j.linux.ffi.Linux;
import io.github.sockmap4j.linux.ffi.SysCalls;
import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.time.Instant;
import java.util.regex.Pattern;

/**
 * A directory where a hand-over listener also puts its socket as a file, for offerers of other
 * network namespaces: an abstract Unix socket is seen only in its own namespace, so two pods of
 * one node (each its own namespace) reach each other's listener only through a directory both
 * mount. Mounting one directory into two pods is what lets them hand regions to each other; the
 * hand-over's own rules (the nonce proved both ways, the listener's uid rule) still decide who
 * gets one.
 *
 * <p>Each socket {@code NAME.sock} has a lock file {@code NAME.lock} beside it, flock-ed by its
 * listener's process for as long as it lives: a process that dies leaves both files, and the next
 * listener in the directory that finds a lock nobody holds removes them ({@link #sweep}).
 *
 * <p>The directory is refused where another user could put files into it and remove ours: it must
 * be this user's or root's, and writable by nobody else unless sticky (as /tmp is: then each
 * removes only its own).
 */
public final class BrokerDirectory {
    /** How every listener's name here begins: the files a sweep looks at. */
    public static final String PREFIX = "sockmap4j-colocated-";
    private static final String SOCKET = ".sock";
    private static final String LOCK = ".lock";
    /** A listener's name, as the agreement carries it without its leading '@'. */
    private static final Pattern NAME = Pattern.compile("[A-Za-z0-9._-]{1,100}");
    /** How old a socket without a lock must be to be taken as left behind (its listener locks before it binds). */
    private static final Duration LOCKLESS_AFTER = Duration.ofMinutes(1);
    private static final int STICKY = 01000;

    /**
     * The system property that names the directory ({@code -Dsockmap4j.colocated.brokerDir}): both
     * ends of a co-located gRPC connection and of an Arrow lending read it at each agreement.
     */
    public static final String PROPERTY = "sockmap4j.colocated.brokerDir";

    private final Path dir;

    private BrokerDirectory(Path dir) {
        this.dir = dir;
    }

    /** The directory {@link #PROPERTY} names now, as an offerer looks into it; null where it names none. */
    public static BrokerDirectory configured() {
        String d = System.getProperty(PROPERTY);
        return d == null || d.isBlank() ? null : of(Path.of(d));
    }

    /**
     * Offers {@code region} to the listener named {@code name} (an abstract name, '@' first): at
     * its socket in the configured directory ({@link #PROPERTY}) where one is named and the socket
     * is there (the way from another network namespace), else, or where nothing listens there, at
     * the abstract name.
     *
     * @throws Handover.NoListenerException where neither is reached, saying where it looked and
     * what to do
     */
    public static void offer(String name, byte[] nonce, SharedRegion region, java.time.Duration timeout)
            throws IOException {
        BrokerDirectory dir = configured();
        Path inDir = null;
        if (dir != null) {
            inDir = dir.socketFor(name.substring(1));
            if (Files.exists(inDir, LinkOption.NOFOLLOW_LINKS)) {
                try {
                    Handover.offer(inDir, nonce, region, timeout);
                    return;
                } catch (Handover.NoListenerException left) {
                    // a socket its listener left behind: the abstract name may still be reached
                }
            }
        }
        try {
            Handover.offer(Path.of(name), nonce, region, timeout);
        } catch (Handover.NoListenerException e) {
            throw new Handover.NoListenerException(e.getMessage() + (inDir == null
                    ? "; a listener in another network namespace (pod) is reached through a directory both mount: "
                    + "-D" + PROPERTY + "=DIR at both ends"
                    : ", nor at " + inDir + " (is -D" + PROPERTY + " the listener's directory too?)"), e);
        }
    }

    /** The directory as an offerer looks into it: nothing is checked or made. */
    public static BrokerDirectory of(Path dir) {
        return new BrokerDirectory(dir.toAbsolutePath().normalize());
    }

    public Path path() {
        return dir;
    }

    /**
     * The directory as a listener puts its socket there: made (mode 0700) where it is missing,
     * and checked.
     *
     * @throws IOException saying what is wrong and what to do: not a directory, another user's,
     * or writable by others without the sticky bit
     */
    public static BrokerDirectory prepare(Path dir) throws IOException {
        BrokerDirectory d = of(dir);
        Path p = d.dir;
        if (!Files.exists(p, LinkOption.NOFOLLOW_LINKS)) {
            try {
                Files.createDirectories(p.getParent());
                Files.createDirectory(p, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
            } catch (java.nio.file.FileAlreadyExistsException raced) {
                // made by another process meanwhile: checked below as any other
            }
        }
        if (!Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS)) {
            throw new IOException("the co-located broker directory " + p + " is not a directory (or is a symbolic link): "
                    + "name a directory both processes mount");
        }
        int uid = (int) Files.getAttribute(p, "unix:uid", LinkOption.NOFOLLOW_LINKS);
        int mode = (int) Files.getAttribute(p, "unix:mode", LinkOption.NOFOLLOW_LINKS);
        int own = SysCalls.geteuid();
        if (uid != own && uid != 0) {
            throw new IOException("the co-located broker directory " + p + " belongs to uid " + uid + ", not to this "
                    + "user (" + own + ") or root: another user could replace the sockets in it; use a directory of "
                    + "this user's, or root's");
        }
        if ((mode & 022) != 0 && (mode & STICKY) == 0) {
            throw new IOException("the co-located broker directory " + p + " is writable by others (mode "
                    + Integer.toOctalString(mode & 07777) + ") without the sticky bit: they could remove the "
                    + "sockets in it; chmod o-w,g-w it, or +t");
        }
        return d;
    }

    /**
     * Where a listener named {@code name} (the agreement's name without its '@') has its socket
     * here: {@code name.sock}, its name given {@link #PREFIX} where it lacks it (the files a sweep
     * looks at).
     */
    public Path socketFor(String name) {
        return dir.resolve(fileName(name) + SOCKET);
    }

    private static String fileName(String name) {
        if (!NAME.matcher(name).matches() || name.startsWith(".")) {
            throw new IllegalArgumentException("not a hand-over's name: '" + name + "'");
        }
        return name.startsWith(PREFIX) ? name : PREFIX + name;
    }

    /**
     * Puts {@code listener}'s expectations at a socket here too, named {@code name}: its lock
     * taken first, then the socket bound. Closing what it returns removes both files.
     */
    public Placed place(Handover.Listener listener, String name) throws IOException {
        Path socket = socketFor(name);
        Path lock = dir.resolve(fileName(name) + LOCK);
        int fd = SysCalls.tryOpen(lock.toString(), Linux.O_RDWR | Linux.O_CREAT | Linux.O_EXCL | Linux.O_NOFOLLOW, 0600);
        if (fd < 0) {
            throw Errno.error("open", fd, lock + " (the co-located broker directory must be writable by this user)");
        }
        try {
            int r = SysCalls.tryFlock(fd, Linux.LOCK_EX | Linux.LOCK_NB);
            if (r != 0) {
                throw Errno.error("flock", r, lock.toString());
            }
            if (!Files.exists(lock, LinkOption.NOFOLLOW_LINKS)) {
                // a sweep took the lock between its making and ours and removed it: not ours to use
                throw new IOException(lock + " was removed as it was made; try again");
            }
            Handover.Listener at = listener.alsoAt(socket);
            Object key;
            try {
                key = fileKey(socket);
            } catch (IOException e) {
                at.close();
                throw e;
            }
            return new Placed(at, socket, lock, fd, key);
        } catch (IOException | RuntimeException e) {
            try {
                Files.deleteIfExists(lock);
            } catch (IOException ignored) {
                // swept by the next listener
            }
            LibC.close(fd);
            throw e;
        }
    }

    private static Object fileKey(Path p) throws IOException {
        return Files.readAttributes(p, java.nio.file.attribute.BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS)
                .fileKey();
    }

    /** What is at a placed socket's path now. */
    public enum Found {
        /** The socket this listener bound. */
        OURS,
        /** Nothing: someone removed it (the listener there is unreachable). */
        GONE,
        /** Another file: someone put their own in its place. */
        REPLACED
    }

    /** A listener's socket in the directory, and the lock that says it lives. */
    public static final class Placed implements AutoCloseable {
        private final Handover.Listener listener;
        private final Path socket;
        private final Path lock;
        private final Object key;
        private int fd;

        private Placed(Handover.Listener listener, Path socket, Path lock, int fd, Object key) {
            this.listener = listener;
            this.socket = socket;
            this.lock = lock;
            this.fd = fd;
            this.key = key;
        }

        /** Whether the file at the socket's path is still the one this listener bound (its device and inode). */
        public Found found() {
            try {
                return key != null && key.equals(fileKey(socket)) ? Found.OURS : Found.REPLACED;
            } catch (NoSuchFileException e) {
                return Found.GONE;
            } catch (IOException e) {
                return Found.REPLACED;
            }
        }

        /** The listener at the socket: its {@link Handover.Listener#acceptOne} takes the offers that come there. */
        public Handover.Listener listener() {
            return listener;
        }

        public Path socket() {
            return socket;
        }

        /** Removes the socket, then the lock. */
        @Override
        public synchronized void close() {
            if (fd < 0) {
                return;
            }
            listener.close(); // removes the socket file
            try {
                Files.deleteIfExists(lock);
            } catch (IOException ignored) {
                // swept by the next listener: nobody holds it once this process ends
            }
            LibC.close(fd);
            fd = -1;
        }
    }

    /**
     * Removes what listeners that died left here: each lock nobody holds, with its socket, and a
     * socket without a lock older than a minute. Files of other users in a sticky directory stay
     * (only they may remove them). How many sockets it removed.
     */
    public int sweep() {
        int removed = 0;
        try (DirectoryStream<Path> entries = Files.newDirectoryStream(dir, PREFIX + "*")) {
            for (Path e : entries) {
                String file = e.getFileName().toString();
                if (file.endsWith(LOCK)) {
                    removed += sweepLock(e, dir.resolve(file.substring(0, file.length() - LOCK.length()) + SOCKET));
                } else if (file.endsWith(SOCKET)) {
                    removed += sweepLockless(e, dir.resolve(file.substring(0, file.length() - SOCKET.length()) + LOCK));
                }
            }
        } catch (IOException | java.nio.file.DirectoryIteratorException e) {
            // an unreadable directory: nothing swept, and the listener says what fails when it binds
        }
        return removed;
    }

    private static int sweepLock(Path lock, Path socket) {
        int fd = SysCalls.tryOpen(lock.toString(), Linux.O_RDONLY | Linux.O_NOFOLLOW, 0);
        if (fd < 0) {
            return 0; // gone meanwhile, or another user's
        }
        try {
            if (SysCalls.tryFlock(fd, Linux.LOCK_EX | Linux.LOCK_NB) != 0) {
                return 0; // its listener lives
            }
            boolean had = Files.deleteIfExists(socket);
            Files.deleteIfExists(lock);
            return had ? 1 : 0;
        } catch (IOException e) {
            return 0; // another user's file in a sticky directory
        } finally {
            LibC.close(fd);
        }
    }

    private static int sweepLockless(Path socket, Path lock) {
        try {
            if (Files.exists(lock, LinkOption.NOFOLLOW_LINKS)) {
                return 0; // the lock decides
            }
            FileTime made = Files.getLastModifiedTime(socket, LinkOption.NOFOLLOW_LINKS);
            if (made.toInstant().isAfter(Instant.now().minus(LOCKLESS_AFTER))) {
                return 0;
            }
            return Files.deleteIfExists(socket) ? 1 : 0;
        } catch (NoSuchFileException gone) {
            return 0;
        } catch (IOException e) {
            return 0;
        }
    }
}
