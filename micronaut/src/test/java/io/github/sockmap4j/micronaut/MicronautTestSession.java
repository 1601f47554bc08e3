package io.github.sockmap4j.micronaut;

import io.github.sockmap4j.testsupport.GlobalSockmapSession;

/** The global Sockmap's pins and cgroup for this module's run (see {@link GlobalSockmapSession}). */
public final class MicronautTestSession extends GlobalSockmapSession {
    public MicronautTestSession() {
        super("micronaut");
    }
}
