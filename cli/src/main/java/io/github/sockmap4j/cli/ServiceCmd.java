package io.github.sockmap4j.cli;

import io.github.sockmap4j.admin.PolicyClient;
import io.github.sockmap4j.admin.SockmapAdmin;
import java.io.IOException;
import java.io.PrintWriter;
import java.net.InetSocketAddress;
import java.util.List;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/**
 * {@code sockmap4j service add|rm|list}: Services whose connects the kernel sends straight to an
 * endpoint (docs/services.md), for a node without Kubernetes or to try one by hand. Through the
 * node agent where one runs (its policy file says who may put which; only whoever put a Service,
 * or root, replaces or removes it), else written directly (root).
 */
@Command(name = "service", mixinStandardHelpOptions = true,
        description = "Services whose connects go straight to an endpoint (connect-time translation).",
        subcommands = {ServiceCmd.Add.class, ServiceCmd.Remove.class, ServiceCmd.ListCmd.class})
final class ServiceCmd {
    @CommandLine.ParentCommand
    SockmapCli parent;

    /** ADDRESS:PORT or [IPV6]:PORT, literals only ({@link SockmapAdmin#endpoint}). */
    static final class EndpointConverter implements CommandLine.ITypeConverter<InetSocketAddress> {
        @Override
        public InetSocketAddress convert(String value) {
            try {
                return SockmapAdmin.endpoint(value);
            } catch (IllegalArgumentException e) {
                throw new CommandLine.TypeConversionException(e.getMessage());
            }
        }
    }

    @Command(name = "add", mixinStandardHelpOptions = true,
            description = "Add a Service (or replace the one of VIP:PORT): its connects go to one of its endpoints, "
                    + "picked with equal odds.")
    static final class Add extends ServiceSub {
        @Option(names = "--local", paramLabel = "ADDRESS:PORT", split = ",", converter = EndpointConverter.class,
                description = "ready endpoints on this node", required = true)
        List<InetSocketAddress> local;

        @Option(names = "--remote", paramLabel = "ADDRESS:PORT", split = ",", converter = EndpointConverter.class,
                description = "ready endpoints on other nodes (picked with the same odds)")
        List<InetSocketAddress> remote = List.of();

        @Option(names = "--local-only", description = "pick among the local endpoints only (internalTrafficPolicy: Local)")
        boolean localOnly;

        @Override
        public Integer call() throws IOException {
            SockmapAdmin.Service s;
            try {
                s = new SockmapAdmin.Service(vip, local, remote, localOnly);
            } catch (IllegalArgumentException e) {
                throw new CommandLine.ParameterException(spec.commandLine(), e.getMessage());
            }
            try (PolicyClient c = PolicyClient.open(parent.parent.pinDir)) {
                c.putService(s);
            }
            spec.commandLine().getOut().println("service " + show(vip) + ": " + local.size() + " local, " + remote.size()
                    + " remote endpoint(s)" + (localOnly ? ", local only" : ""));
            return 0;
        }
    }

    @Command(name = "rm", mixinStandardHelpOptions = true, description = "Remove a Service: its connects go through "
            + "kube-proxy's NAT again (open connections are untouched).")
    static final class Remove extends ServiceSub {
        @Override
        public Integer call() throws IOException {
            boolean was;
            try (PolicyClient c = PolicyClient.open(parent.parent.pinDir)) {
                was = c.removeService(vip);
            }
            spec.commandLine().getOut().println(was ? "removed service " + show(vip) : "no service " + show(vip));
            return was ? 0 : SockmapCli.FAILED;
        }
    }

    @Command(name = "list", mixinStandardHelpOptions = true, description = "The Services and their endpoints.")
    static final class ListCmd extends Sub<ServiceCmd> {
        @Override
        public Integer call() throws IOException {
            PrintWriter out = spec.commandLine().getOut();
            List<String> all;
            try (PolicyClient c = PolicyClient.open(parent.parent.pinDir)) {
                all = c.services();
            }
            all.forEach(out::println);
            out.println(all.size() + " service(s)");
            return 0;
        }
    }

    /** A command on one Service: its {@code VIP:PORT}. */
    abstract static class ServiceSub extends Sub<ServiceCmd> {
        @Parameters(index = "0", paramLabel = "VIP:PORT", converter = EndpointConverter.class)
        InetSocketAddress vip;
    }

    static String show(InetSocketAddress a) {
        String h = a.getAddress().getHostAddress();
        return (h.contains(":") ? "[" + h + "]" : h) + ":" + a.getPort();
    }

}
