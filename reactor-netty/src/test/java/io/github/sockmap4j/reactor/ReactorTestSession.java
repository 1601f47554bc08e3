package io.github.sockmap4j.reactor;

import io.github.sockmap4j.testsupport.GlobalSockmapSession;

/** The global Sockmap's pins and cgroup for this module's run (see {@link GlobalSockmapSession}). */
public final class ReactorTestSession extends GlobalSockmapSession {
    public ReactorTestSession() {
        super("reactor");
    }
}
