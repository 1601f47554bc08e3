package io.github.sockmap4j.internal.flow;

import java.util.Objects;
import java.util.function.Function;

/**
 * How this module's exported packages other than {@code io.github.sockmap4j} ({@code spi},
 * {@code admin}) reach the open kernel side of a {@code Sockmap} without a public accessor: the
 * class installs its accessor here when it initialises (the JDK's shared-secrets shape). The
 * package is not exported, so under JPMS no other module can call it.
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
public final class FastPathAccess {
    private static volatile Function<Object, FastPath> accessor;

    private FastPathAccess() {
    }

    /**
     * Installs the accessor; once.
     *
     * @throws IllegalStateException when one is installed already
     */
    public static synchronized void install(Function<Object, FastPath> sockmapToFastPath) {
        if (accessor != null) {
            throw new IllegalStateException("the Sockmap accessor is installed already");
        }
        accessor = Objects.requireNonNull(sockmapToFastPath);
    }

    /**
     * The open kernel side of {@code sockmap}, or null when it has none (off, through an agent,
     * closed). A caller holds an instance, so the class has initialised and installed.
     */
    public static FastPath of(Object sockmap) {
        return accessor.apply(Objects.requireNonNull(sockmap, "sockmap"));
    }
}
