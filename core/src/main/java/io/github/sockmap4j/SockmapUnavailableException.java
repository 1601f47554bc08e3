package io.github.sockmap4j;

import java.io.IOException;

/** The fast path is off and was required; the message says why and what to do. */
public final class SockmapUnavailableException extends IOException {
    private static final long serialVersionUID = 1L;

    public SockmapUnavailableException(String message, Throwable cause) {
        super(message, cause);
    }
}
