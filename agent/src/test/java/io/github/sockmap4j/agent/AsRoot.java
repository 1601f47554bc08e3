package io.github.sockmap4j.agent;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.admin.PolicyClient;
import io.github.sockmap4j.admin.Rule;
import java.io.IOException;
import java.nio.file.Path;

/**
 * What root asks a running agent for, as {@code sockmap4j allow|deny PORT[/CIDR]...} does (the
 * command line is a client of the same {@link PolicyClient}): rules held by root until denied.
 */
final class AsRoot {
    private AsRoot() {
    }

    /** Opts each {@code PORT[/CIDR]} in through the agent of {@code pins}. */
    static void allow(Path pins, String... rules) throws IOException {
        try (PolicyClient c = PolicyClient.open(pins)) {
            assertTrue(c.viaAgent(), "an agent serves " + pins);
            for (String r : rules) {
                c.allow(Rule.parse(r));
            }
        }
    }

    /**
     * Rules with an in-flight bound ({@code sockmap4j allow --bound BYTES}): through the agent where
     * one runs, else written into the policy map directly, as root may.
     */
    static void allowBounded(Path pins, int bound, String... rules) throws IOException {
        try (PolicyClient c = PolicyClient.open(pins)) {
            for (String r : rules) {
                c.allow(Rule.parse(r).withBound(bound));
            }
        }
    }

    /** Removes each rule {@link #allow} made; the agent refuses, with why, one that is not there. */
    static void deny(Path pins, String... rules) throws IOException {
        try (PolicyClient c = PolicyClient.open(pins)) {
            assertTrue(c.viaAgent(), "an agent serves " + pins);
            for (String r : rules) {
                c.deny(Rule.parse(r));
            }
        }
    }
}
