package io.github.sockmap4j.linux.bpf;

import io.github.sockmap4j.linux.ffi.Errno;
import io.github.sockmap4j.linux.ffi.LibC;
import io.github.sockmap4j.linux.ffi.Libbpf;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The sets of pins of another ABI version a node agent retired from its directory
 * ({@code DIR/retired-abi-N-K}): moved aside whole, their links unpinned once this version's
 * programs are attached, removed once their SOCKHASH is empty (docs/agent.md, "Upgrades").
 */
public final class RetiredSets {
    /** The subdirectories the pins of another ABI version are moved to ({@link #retire}). */
    static final String PREFIX = "retired-abi-";
    private static final Logger LOG = LoggerFactory.getLogger(RetiredSets.class);

    private RetiredSets() {
    }

    /**
     * Moves every pin of {@code dir} into a subdirectory of its own, {@code retired-abi-N-K}, so
     * that a set of this version can be made in {@code dir}. Nothing of the old set changes: its
     * programs stay attached to the cgroups until {@link #detach} unpins their links, and
     * the sockets in its SOCKHASH stay redirected, with their unread bytes, by its own verdict
     * until they close; {@link #reap} then removes the set. Under the setup lock.
     *
     * @return the directory the set went to
     */
    static Path retire(Path dir, int abi) throws IOException {
        Path to;
        int k = 1;
        while (Files.exists(to = dir.resolve(PREFIX + abi + "-" + k))) {
            k++;
        }
        Files.createDirectory(to);
        int n = 0;
        try (var entries = Files.list(dir)) {
            for (Path p : (Iterable<Path>) entries::iterator) {
                if (!Files.isDirectory(p)) {
                    Files.move(p, to.resolve(p.getFileName())); // rename(2): the pinned object is the same
                    n++;
                }
            }
        }
        LOG.info("Retired the {} pins of sockmap4j ABI {} in {} to {}: their connections stay redirected by their "
                + "own programs until they close; new connections get this version's (ABI {})", n, abi, dir, to,
                Pins.ABI_VERSION);
        return to;
    }

    /** The retired sets of {@code dir} ({@link #retire}), oldest first. */
    public static List<Path> list(Path dir) throws IOException {
        if (!Files.isDirectory(dir)) {
            return List.of();
        }
        try (var entries = Files.list(dir)) {
            return entries.filter(p -> Files.isDirectory(p) && p.getFileName().toString().startsWith(PREFIX))
                    .sorted().toList();
        }
    }

    /**
     * Unpins the cgroup links of every retired set: their programs leave the cgroups, so no new
     * socket enters a retired map. Called once this version's programs are attached.
     *
     * @return how many links were unpinned
     */
    public static int detach(Path dir) throws IOException {
        int n = 0;
        for (Path set : list(dir)) {
            n += Pins.unpinLinks(set);
        }
        return n;
    }

    /**
     * Removes each retired set whose SOCKHASH no longer holds a socket: the kernel takes a socket
     * out of every socket map as it closes, so an empty one had its last connection end. A set's
     * cgroup links go first ({@link #detach}), so its map only empties.
     *
     * @return the sets removed
     */
    public static List<Path> reap(Libbpf bpf, Path dir) throws IOException {
        List<Path> removed = new ArrayList<>();
        for (Path set : list(dir)) {
            Pins.unpinLinks(set);
            if (registeredIn(bpf, set) == 0) {
                remove(set);
                removed.add(set);
                LOG.info("Removed the retired sockmap4j pins {}: their last connection closed", set);
            }
        }
        return removed;
    }

    /** The sockets in a retired set's SOCKHASH (its {@code socks} pin); 0 when it has none. */
    static int registeredIn(Libbpf bpf, Path set) throws IOException {
        int fd = bpf.tryGetPinned(Pin.SOCKS.path(set));
        if (fd < 0) {
            if (-fd == Errno.ENOENT) {
                return 0;
            }
            throw Errno.error("bpf_obj_get", fd, Pin.SOCKS.path(set));
        }
        try {
            return Pins.countKeys(bpf, fd, bpf.mapInfo(fd).keySize());
        } finally {
            LibC.close(fd);
        }
    }

    static void remove(Path set) throws IOException {
        try (var entries = Files.list(set)) {
            for (Path p : (Iterable<Path>) entries::iterator) {
                Files.deleteIfExists(p);
            }
        }
        Files.deleteIfExists(set);
    }
}
