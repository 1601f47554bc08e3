package io.github.sockmap4j.vertx;

import io.github.sockmap4j.testsupport.GlobalSockmapSession;

/** The global Sockmap's pins and cgroup for this module's run (see {@link GlobalSockmapSession}). */
public final class VertxTestSession extends GlobalSockmapSession {
    public VertxTestSession() {
        super("vertx");
    }
}
