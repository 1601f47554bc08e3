package io.github.sockmap4j.testsupport;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapStats;

/**
 * The kernel's witness of what a test sent: the redirect counters of a pin directory from the
 * moment this was started. Frameworks can hand out stock channels without a word, so a test
 * asserts these counters and the channels' class, never one of them alone.
 */
public final class RedirectedShare {
    private final Sockmap sockmap;
    private final SockmapStats before;

    private RedirectedShare(Sockmap sockmap) {
        this.sockmap = sockmap;
        this.before = sockmap.stats();
    }

    /** Counting from now, on {@code sockmap}'s pin directory. */
    public static RedirectedShare start(Sockmap sockmap) {
        return new RedirectedShare(sockmap);
    }

    /** Bytes redirected since the start. */
    public long redirectedBytes() {
        return sockmap.stats().bytesRedirected() - before.bytesRedirected();
    }

    /** Bytes of registered sockets that went by TCP since the start. */
    public long passedBytes() {
        return sockmap.stats().bytesPassed() - before.bytesPassed();
    }

    /** Sends that found the in-flight bound reached since the start. */
    public long boundHits() {
        return sockmap.stats().boundHits() - before.boundHits();
    }

    /**
     * At least {@code share} of the registered sockets' bytes went through the redirect, and at
     * least {@code leastBytes} were redirected (what the test itself sent: sockets that were
     * never registered count in neither figure).
     */
    public void assertRedirected(double share, long leastBytes, String what) {
        SockmapStats now = sockmap.stats();
        long redirected = now.bytesRedirected() - before.bytesRedirected();
        long passed = now.bytesPassed() - before.bytesPassed();
        String figures = what + ": " + redirected + " bytes redirected, " + passed + " by TCP, "
                + (now.boundHits() - before.boundHits()) + " bound hits, " + leastBytes + " sent by the test; "
                + before + " -> " + now;
        if (redirected < leastBytes) {
            throw new AssertionError("fewer bytes redirected than the test sent. " + figures);
        }
        if (redirected < share * (redirected + passed)) {
            throw new AssertionError("less than " + share * 100 + "% of the bytes redirected. " + figures);
        }
    }

    /** No send found the in-flight bound reached: the writers held back for credit instead. */
    public void assertNoBoundHits(String what) {
        long hits = boundHits();
        if (hits != 0) {
            throw new AssertionError(what + ": " + hits + " sends found the in-flight bound reached and went by TCP");
        }
    }

    /** Not one byte was redirected: what a stock channel's connection shows. */
    public void assertNone(String what) {
        long redirected = redirectedBytes();
        if (redirected != 0) {
            throw new AssertionError(what + ": " + redirected + " bytes redirected, expected none");
        }
    }
}
