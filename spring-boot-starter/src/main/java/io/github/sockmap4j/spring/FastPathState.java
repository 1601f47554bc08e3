package io.github.sockmap4j.spring;

import io.github.sockmap4j.Sockmap;

/**
 * How the start-up log says where a server or client runs: on the fast path only when it is
 * active, else plainly off and why (the lines users are told to look for must not claim it).
 */
final class FastPathState {
    private FastPathState() {
    }

    /** "runs on the sockmap fast path", or "uses sockmap4j's transport on plain TCP (the fast path is off: why)". */
    static String of(Sockmap sockmap) {
        if (sockmap.isActive()) {
            return "runs on the sockmap fast path";
        }
        return "uses sockmap4j's transport on plain TCP (the sockmap fast path is off: " + sockmap.unavailabilityCause()
                + ")";
    }
}
