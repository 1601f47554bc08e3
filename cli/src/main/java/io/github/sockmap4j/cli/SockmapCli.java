package io.github.sockmap4j.cli;

import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapConfig;
import io.github.sockmap4j.SockmapStats;
import io.github.sockmap4j.admin.PolicyClient;
import io.github.sockmap4j.admin.Rule;
import io.github.sockmap4j.admin.SockmapAdmin;
import io.github.sockmap4j.agent.AgentCommand;
import io.github.sockmap4j.agent.PinDirectory;
import java.io.IOException;
import java.io.PrintWriter;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine;

/**
 * {@code sockmap4j}: the node agent and operator's tool.
 *
 * <pre>
 * sockmap4j up --cgroup DIR [--group G]   load, pin, attach; the pins outlive this command
 * sockmap4j status [--json]               mode, attachments, counters
 * sockmap4j stats [--watch S] [--json]    the kernel counters
 * sockmap4j allow PORT[/CIDR...] [--bound BYTES]
 * sockmap4j deny PORT[/CIDR...]
 * sockmap4j down                          remove pins and attachments
 * sockmap4j agent --cgroup DIR [--policy F] [--metrics-port P] [--kubernetes]
 *                                         the node agent, in the foreground until SIGTERM
 * sockmap4j rules                         the rules a running agent holds, and who holds them
 * sockmap4j xdp IFACE RULES [--seconds S] attach an XDP filter, print its counters, detach
 * </pre>
 *
 * Exit codes: 0 done; 1 failed (the message says why and what to do); 2 bad usage; 3 not up.
 */
@Command(name = "sockmap4j", mixinStandardHelpOptions = true, version = "sockmap4j 0.1.0-SNAPSHOT",
        description = "The sockmap fast path's node agent and operator's tool.",
        exitCodeListHeading = "Exit codes:%n",
        exitCodeList = {"0:done", "1:failed (the message says why)", "2:bad usage", "3:not up"},
        subcommands = {SockmapCli.Up.class, SockmapCli.Status.class, SockmapCli.Stats.class, SockmapCli.Allow.class,
            SockmapCli.Deny.class, SockmapCli.Down.class, SockmapCli.Xdp.class, AgentCommand.class,
            SockmapCli.RulesCmd.class, ServiceCmd.class})
public final class SockmapCli implements PinDirectory {
    static final int FAILED = 1;
    static final int NOT_UP = 3;

    @Option(names = "--pin-dir", description = "bpffs directory of the pins (default: ${DEFAULT-VALUE})",
            defaultValue = "${sys:sockmap4j.pinDir:-/sys/fs/bpf/sockmap4j}", scope = CommandLine.ScopeType.INHERIT)
    Path pinDir;

    @Option(names = "--json", description = "print JSON", scope = CommandLine.ScopeType.INHERIT)
    boolean json;

    @Override
    public Path pinDirectory() {
        return pinDir;
    }

    public static void main(String[] args) {
        System.exit(run(new PrintWriter(System.out, true), new PrintWriter(System.err, true), args));
    }

    /** Runs a command line; returns the exit code. */
    public static int run(PrintWriter out, PrintWriter err, String... args) {
        CommandLine cl = new CommandLine(new SockmapCli());
        cl.setOut(out);
        cl.setErr(err);
        cl.setExecutionExceptionHandler((e, cmd, parsed) -> {
            String message = e.getMessage() != null ? e.getMessage() : e.toString();
            cmd.getErr().println("sockmap4j: " + message
                    + withoutPrivileges(cmd.getCommandName(), message, effectiveCapabilities()));
            return FAILED;
        });
        return cl.execute(args);
    }

    /** CAP_SYS_ADMIN and CAP_BPF: either lets a process open the kernel's pinned maps. */
    private static final long CAN_BPF = (1L << 21) | (1L << 39);

    /**
     * What to do when a command failed without the privileges it needs: every command but help
     * and version opens the kernel's pinned maps or programs, which root (CAP_BPF, or
     * CAP_SYS_ADMIN) may, and a group the pins' owner granted may for the policy map only.
     */
    static String withoutPrivileges(String command, String message, long capEff) {
        if (!(message.contains("EACCES") || message.contains("EPERM")) || (capEff & CAN_BPF) != 0) {
            return "";
        }
        return System.lineSeparator() + "sockmap4j: '" + command + "' opens the kernel's pinned maps, which needs root "
                + "(CAP_BPF or CAP_SYS_ADMIN; 'up', 'down', 'agent' and 'xdp' also CAP_NET_ADMIN): run it with sudo, "
                + "or in the agent's container ('kubectl exec ... sockmap4j " + command + "'); a service's own process "
                + "needs none of it to opt in where an agent runs";
    }

    /** This process's effective capabilities (/proc/self/status); all of them when it cannot tell. */
    static long effectiveCapabilities() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
                if (line.startsWith("CapEff:")) {
                    return Long.parseUnsignedLong(line.substring(7).trim(), 16);
                }
            }
        } catch (IOException | NumberFormatException e) {
            // cannot tell: say nothing rather than something wrong
        }
        return -1L;
    }

    /** An in-flight bound in bytes: 0 (each receiver's) or more. */
    static final class BoundConverter implements CommandLine.ITypeConverter<Integer> {
        @Override
        public Integer convert(String value) {
            int bytes;
            try {
                bytes = Integer.parseInt(value);
            } catch (NumberFormatException e) {
                throw new CommandLine.TypeConversionException("not a number of bytes: '" + value + "'");
            }
            if (bytes < 0) {
                throw new CommandLine.TypeConversionException("a bound is 0 (each receiver's) or a positive number "
                        + "of bytes: '" + value + "'");
            }
            return bytes;
        }
    }

    private static final tools.jackson.databind.json.JsonMapper JSON = tools.jackson.databind.json.JsonMapper.builder()
            .build();

    /** One JSON object of the given names and values, in that order. */
    static String json(Object... kv) {
        java.util.Map<String, Object> m = new java.util.LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put((String) kv[i], kv[i + 1]);
        }
        return JSON.writeValueAsString(m);
    }

    /**
     * What "by TCP" leaves out, said beside it: it counts the sends of registered sockets, so a
     * server's connections from clients that are not registered (outside the attached cgroup, or
     * another host's) send by TCP uncounted.
     */
    static String notCounted(SockmapStats st) {
        long n = st.clientsUnregistered();
        return n == 0 ? "" : " (registered sockets' only: " + n + " accepted connection" + (n == 1 ? "" : "s")
                + " whose client was not registered, outside the attached cgroup or on another host, went by TCP "
                + "uncounted)";
    }

    /** A mesh leg's counters as a line: "N sockets, R B redirected / T B by TCP". */
    static String leg(io.github.sockmap4j.MeshStats.Leg l) {
        return l.sockets() + " sockets, " + l.bytesRedirected() + " B redirected / " + l.bytesByTcp() + " B by TCP";
    }

    /** A record (or any bean) as JSON: every component, by its name. */
    static String json(Object value) {
        return JSON.writeValueAsString(value);
    }

    @Command(name = "up", mixinStandardHelpOptions = true, description = "Load the programs, pin them, attach to a cgroup; the pins outlive this command.")
    static final class Up extends Sub<SockmapCli> {
        @Option(names = "--cgroup", required = true, description = "cgroup v2 directory to attach to")
        Path cgroup;

        @Option(names = "--group", description = "let this group opt in without privileges")
        String group;

        @Option(names = "--allow-root-cgroup", description = "accept attaching to the root cgroup (every process)")
        boolean allowRoot;

        @Option(names = "--max-sockets", defaultValue = "65535", description = "SOCKHASH capacity")
        int maxSockets;

        @Override
        public Integer call() throws IOException {
            SockmapConfig config = SockmapConfig.builder().pinDirectory(parent.pinDir).cgroup(cgroup)
                    .maxSockets(maxSockets).required(true).allowRootCgroup(allowRoot).probe(false).build();
            SockmapAdmin.up(config);
            if (group != null) {
                PolicyClient.grant(parent.pinDir, group);
            }
            PrintWriter out = spec.commandLine().getOut();
            out.println(parent.json ? json("up", true, "pinDir", parent.pinDir.toString(), "cgroup", cgroup.toString())
                    : "up: pins in " + parent.pinDir + ", attached to " + cgroup);
            return 0;
        }
    }

    @Command(name = "status", mixinStandardHelpOptions = true, description = "Whether the agent is up, its attachments and counters.")
    static final class Status extends Sub<SockmapCli> {
        @Override
        public Integer call() throws IOException {
            PrintWriter out = spec.commandLine().getOut();
            boolean up = SockmapAdmin.of(parent.pinDir).isUp();
            // Pins an embedded service made (Sockmap.global()) are not an agent's, but they are up too.
            SockmapStats stats = SockmapAdmin.of(parent.pinDir).stats();
            String mode = up ? "agent" : stats != null ? "service" : "none";
            List<String> links = new ArrayList<>();
            List<String> paths = new ArrayList<>();
            SockmapAdmin.of(parent.pinDir).attachedCgroupPaths().forEach((id, path) -> {
                links.add(Long.toString(id));
                paths.add(path == null ? "(id " + id + ", not found under this host's cgroup v2 mount)"
                        : path + " (id " + id + ")");
            });
            List<String> retired = new ArrayList<>();
            SockmapAdmin.of(parent.pinDir).retiredSets().forEach(p -> retired.add(p.getFileName().toString()));
            up |= stats != null;
            if (parent.json) {
                out.println(json("up", up, "mode", mode, "pinDir", parent.pinDir.toString(),
                        "kernel", System.getProperty("os.version"), "cgroupIds", links, "cgroups", paths, "retired", retired,
                        "stats", stats));
            } else {
                out.println((up ? "up" : "not up") + (up ? " (" + (mode.equals("agent") ? "pinned by 'up' or an agent"
                        : "pinned by a service's Sockmap") + ")" : "") + ": pins " + parent.pinDir + ", kernel "
                        + System.getProperty("os.version") + ", attached to " + (paths.isEmpty() ? "no cgroup"
                        : String.join(", ", paths))
                        + (retired.isEmpty() ? "" : ", retired sets of another version waiting for their connections "
                        + "to close: " + retired));
            }
            return up ? 0 : NOT_UP;
        }
    }

    @Command(name = "stats", mixinStandardHelpOptions = true, description = "The kernel counters of the fast path.")
    static final class Stats extends Sub<SockmapCli> {
        @Option(names = "--watch", description = "print every second for this many seconds")
        int watch;

        @Override
        public Integer call() throws IOException, InterruptedException {
            PrintWriter out = spec.commandLine().getOut();
            if (watch < 0) {
                throw new CommandLine.ParameterException(spec.commandLine(), "--watch takes 0 or more seconds: "
                        + watch);
            }
            if (SockmapAdmin.of(parent.pinDir).stats() == null) {
                out.println("not up: nothing pinned in " + parent.pinDir + " (run 'sockmap4j up', or name the pin "
                        + "directory of a service with --pin-dir)");
                return NOT_UP;
            }
            for (int i = 0; i <= watch; i++) {
                if (i > 0) {
                    Thread.sleep(1000);
                }
                SockmapStats st = SockmapAdmin.of(parent.pinDir).stats();
                if (st == null) {
                    out.println("not up: the pins of " + parent.pinDir + " went away");
                    return NOT_UP;
                }
                out.println(parent.json ? json(st) : String.format(Locale.ROOT,
                        "registered %d, in map %d, redirected %d msgs / %d B, by TCP %d msgs / %d B%s, bound hits %d, "
                                + "resumes %d, tainted %d, register failures %d, accepted with no registered client %d, "
                                + "clients of a server not on this node %d, keys another connection holds %d, "
                                + "in another program's sockmap %d, "
                                + "Service connects translated %d, without a local endpoint %d, "
                                + "original destinations answered with a Service %d; meshed pods: connects captured %d, "
                                + "sent to an inbound port %d, original destinations told %d (client port "
                                + "renumbered %d), app-proxy %s, "
                                + "proxy-proxy %s, proxy-app %s",
                        st.socketsRegistered(), st.socketsInMap(), st.messagesRedirected(), st.bytesRedirected(),
                        st.messagesPassed(), st.bytesPassed(), notCounted(st), st.boundHits(), st.resumes(),
                        st.socketsTainted(),
                        st.registerFailures(), st.clientsUnregistered(), st.peersNotLocal(), st.keysTaken(),
                        st.socketsBusy(), st.servicesTranslated(),
                        st.servicesNoLocal(), st.originalDestinations(), st.mesh().captured(), st.mesh().inbound(),
                        st.mesh().originalDestinations(), st.mesh().renumbered(), leg(st.mesh().appToProxy()), leg(st.mesh().proxyToProxy()),
                        leg(st.mesh().proxyToApp())));
            }
            return 0;
        }
    }

    @Command(name = "allow", mixinStandardHelpOptions = true, description = "Opt server ports (optionally CIDRs) in, until 'deny'.")
    static final class Allow extends RuleCommand {
        @Option(names = "--bound", defaultValue = "0", converter = BoundConverter.class,
                description = "in-flight bound in bytes (0: the receiver's)")
        int bound;

        @Override
        public Integer call() throws IOException {
            try (PolicyClient c = PolicyClient.open(parent.pinDir)) {
                for (Rule t : targets) {
                    c.allow(t.withBound(bound));
                }
            }
            spec.commandLine().getOut().println("allowed " + targets.size() + " rule(s)");
            return 0;
        }
    }

    @Command(name = "deny", mixinStandardHelpOptions = true, description = "Remove rules 'allow' made.")
    static final class Deny extends RuleCommand {
        @Override
        public Integer call() throws IOException {
            int denied = 0;
            List<String> missing = new ArrayList<>();
            try (PolicyClient c = PolicyClient.open(parent.pinDir)) {
                for (Rule t : targets) {
                    if (c.deny(t)) {
                        denied++;
                    } else {
                        missing.add(t.target());
                    }
                }
            }
            for (String m : missing) {
                spec.commandLine().getErr().println("sockmap4j: no rule for " + m + " (nothing to remove)");
            }
            spec.commandLine().getOut().println("denied " + denied + " rule(s)");
            return missing.isEmpty() ? 0 : FAILED;
        }
    }

    @Command(name = "rules", mixinStandardHelpOptions = true, description = "The rules a running agent holds, and who holds each; without an agent, the policy map's rules.")
    static final class RulesCmd extends Sub<SockmapCli> {
        @Override
        public Integer call() throws IOException {
            PrintWriter out = spec.commandLine().getOut();
            if (SockmapAdmin.of(parent.pinDir).stats() == null) {
                out.println("not up: nothing pinned in " + parent.pinDir + " (run 'sockmap4j up', or name the pin "
                        + "directory of a service with --pin-dir)");
                return NOT_UP;
            }
            try (PolicyClient c = PolicyClient.open(parent.pinDir)) {
                List<String> rules = c.rules();
                if (parent.json) {
                    out.println(json("rules", rules));
                } else {
                    rules.forEach(out::println);
                    out.println(rules.size() + " rule(s)");
                }
            }
            return 0;
        }
    }

    @Command(name = "down", mixinStandardHelpOptions = true, description = "Remove the pins and attachments (connections leave the fast path).")
    static final class Down extends Sub<SockmapCli> {
        @Option(names = "--force", description = "remove them even while a node agent serves them (the agent "
                + "then exits: it finds its pins gone)")
        boolean force;

        @Override
        public Integer call() throws IOException {
            if (!force && SockmapAdmin.of(parent.pinDir).agentRunning()) {
                spec.commandLine().getErr().println("down: a sockmap4j agent serves " + parent.pinDir + " (its control "
                        + "socket " + SockmapAdmin.of(parent.pinDir).agentSocket() + " answers): stop it first, or run "
                        + "'sockmap4j down --force' to remove the pins under it (it then exits)");
                return 1;
            }
            int n = SockmapAdmin.of(parent.pinDir).removePins();
            spec.commandLine().getOut().println(n == 0 ? "nothing to remove in " + parent.pinDir
                    : "down: removed " + n + " pins from " + parent.pinDir);
            return 0;
        }
    }

    @Command(name = "xdp", mixinStandardHelpOptions = true, description = "Attach an XDP filter with rules from a file, print its counters every "
            + "second, detach at the end.")
    static final class Xdp extends Sub<SockmapCli> {
        @Parameters(index = "0", paramLabel = "INTERFACE")
        String iface;

        @Parameters(index = "1", paramLabel = "RULES-FILE",
                description = "'default pass|drop', 'allow|deny CIDR', 'allow|deny tcp|udp PORT', one a line")
        Path rulesFile;

        @Option(names = "--seconds", defaultValue = "2147483647", description = "how long to keep it attached")
        int seconds;

        @Override
        public Integer call() throws IOException, InterruptedException {
            PrintWriter out = spec.commandLine().getOut();
            if (seconds < 1) {
                throw new CommandLine.ParameterException(spec.commandLine(), "--seconds takes 1 or more: " + seconds);
            }
            io.github.sockmap4j.xdp.XdpRules rules = io.github.sockmap4j.xdp.XdpRules.parse(rulesFile);
            try (io.github.sockmap4j.xdp.XdpFilter f = io.github.sockmap4j.xdp.XdpFilter.attach(iface,
                    rules.defaultAction())) {
                List<String> names = rules.applyTo(f);
                out.println(parent.json ? json("interface", iface, "mode", f.mode().name(), "rules", names.size())
                        : "xdp: " + iface + " (" + f.mode() + " mode), " + names.size() + " rules, default "
                        + rules.defaultAction());
                for (int s = 1; s <= seconds; s++) {
                    Thread.sleep(1000);
                    io.github.sockmap4j.xdp.XdpFilter.Counters c = f.counters();
                    out.println(parent.json ? json("passed", c.passed(), "dropped", c.dropped(), "malformed",
                            c.malformed(), "defaulted", c.defaulted())
                            : String.format(Locale.ROOT, "%ds passed %d dropped %d malformed %d default %d", s,
                            c.passed(), c.dropped(), c.malformed(), c.defaulted()));
                }
            }
            return 0;
        }
    }

    /** A command on rules: {@code PORT[/CIDR]} arguments, one or more. */
    abstract static class RuleCommand extends Sub<SockmapCli> {
        @Parameters(arity = "1..*", paramLabel = "PORT[/CIDR]", converter = RuleConverter.class)
        List<Rule> targets;
    }

    static final class RuleConverter implements CommandLine.ITypeConverter<Rule> {
        @Override
        public Rule convert(String value) {
            try {
                return Rule.parse(value);
            } catch (IllegalArgumentException e) {
                throw new CommandLine.TypeConversionException(e.getMessage());
            }
        }
    }
}
