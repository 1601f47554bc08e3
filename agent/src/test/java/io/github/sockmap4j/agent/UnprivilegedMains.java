package io.github.sockmap4j.agent;

import io.github.sockmap4j.OptIn;
import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapConfig;
import io.github.sockmap4j.admin.PolicyClient;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;

/** Programs the agent's tests run in a second process without privileges. Each prints key=value lines. */
public final class UnprivilegedMains {
    private UnprivilegedMains() {
    }

    /** Opts a port in through PolicyClient (run without privileges); prints opted= or error=. */
    public static final class UnprivilegedOptIn {
        private UnprivilegedOptIn() {
        }

        public static void main(String[] args) throws Exception {
            System.out.println("uid=" + java.nio.file.Files.getAttribute(java.nio.file.Path.of("/proc/self"), "unix:uid"));
            try (PolicyClient client = PolicyClient.open(Path.of(args[0]));
                 OptIn optIn = client.optIn(Integer.parseInt(args[1]))) {
                System.out.println("opted=" + optIn.port());
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
            } catch (java.io.IOException e) {
                System.out.println("error=" + e.getMessage());
            }
        }
    }

    /**
     * Opens the fast path of pin directory args[0] (without privileges: inactive), opts port
     * args[1] in, prints active=, cause= and opted= (or error=), and holds the opt-in until a line
     * arrives on stdin.
     */
    public static final class UnprivilegedLibraryOptIn {
        private UnprivilegedLibraryOptIn() {
        }

        public static void main(String[] args) throws Exception {
            try (Sockmap s = Sockmap.open(SockmapConfig.builder().pinDirectory(Path.of(args[0]))
                    .required(args.length > 2).build())) {
                System.out.println("active=" + s.isActive());
                System.out.println("cause=" + s.unavailabilityCause());
                try (OptIn optIn = s.optIn(Integer.parseInt(args[1]))) {
                    System.out.println("opted=" + optIn.active());
                    new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
                } catch (java.io.IOException e) {
                    System.out.println("error=" + e.getMessage());
                }
            }
        }
    }
}
