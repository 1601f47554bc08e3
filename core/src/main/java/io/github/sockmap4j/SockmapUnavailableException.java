package io.github.sockmap4j;

/**
 * The fast path is off and was required ({@code sockmap4j.require=true}, or
 * {@link SockmapConfig#required()}); the message says why and what to do. The one type thrown for
 * that everywhere: by {@link Sockmap#open}, {@link Sockmap#global()} and {@link Sockmap#ensureActive()},
 * and as the cause of a failed bind or connect of the Netty transport (gRPC's
 * {@code Server.start()} then throws an {@code IOException} whose cause is this). Unchecked, so that
 * {@code Sockmap.global()} can throw it where a service starts.
 */
public final class SockmapUnavailableException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public SockmapUnavailableException(String message, Throwable cause) {
        super(message, cause);
    }
}
