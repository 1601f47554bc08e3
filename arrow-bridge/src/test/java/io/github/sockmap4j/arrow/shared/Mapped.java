package io.github.sockmap4j.arrow.shared;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

/** What this process holds of the shared memory a test made: as the kernel lists it. */
final class Mapped {
    private Mapped() {
    }

    /** Descriptors and mappings of memory files whose name contains {@code name}. */
    static List<String> regions(String name) throws IOException {
        List<String> found = new ArrayList<>();
        try (Stream<Path> fds = Files.list(Path.of("/proc/self/fd"))) {
            fds.forEach(fd -> {
                try {
                    if (Files.readSymbolicLink(fd).toString().contains(name)) {
                        found.add("fd " + fd.getFileName());
                    }
                } catch (IOException gone) {
                    // the listing's own descriptor, closed by now
                }
            });
        }
        Files.readAllLines(Path.of("/proc/self/maps")).stream().filter(l -> l.contains(name)).forEach(found::add);
        return found;
    }
}
