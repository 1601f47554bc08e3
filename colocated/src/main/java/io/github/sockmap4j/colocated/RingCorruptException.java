package io.github.sockmap4j.colocated;

import java.io.IOException;

/**
 * What a ring's peer wrote cannot be a record or a position of a well-behaved peer (a length past
 * what was published, a position that runs backwards or past the capacity, a region of another
 * layout). The connection the ring belongs to is to be closed; nothing was read out of bounds.
 */
public final class RingCorruptException extends IOException {
    private static final long serialVersionUID = 1L;

    public RingCorruptException(String message) {
        super(message);
    }
}
