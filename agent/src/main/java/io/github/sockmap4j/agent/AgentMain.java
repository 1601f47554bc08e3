package io.github.sockmap4j.agent;

import java.io.PrintWriter;
import java.nio.file.Path;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * The node agent without the rest of the command line: {@code AgentMain [--pin-dir DIR] agent
 * --cgroup DIR ...} takes the arguments {@code sockmap4j [--pin-dir DIR] agent ...} takes, for a
 * process that runs the agent alone (the agent module's tests start it so). Exit codes as the
 * command line's: 0 stopped, 1 failed (the message says why), 2 bad usage, 3 the pins were
 * removed under it.
 */
@Command(name = "sockmap4j-agent", mixinStandardHelpOptions = true, version = "sockmap4j 0.1.0-SNAPSHOT",
        description = "The sockmap fast path's node agent.", subcommands = AgentCommand.class)
public final class AgentMain implements PinDirectory {
    @Option(names = "--pin-dir", description = "bpffs directory of the pins (default: ${DEFAULT-VALUE})",
            defaultValue = "${sys:sockmap4j.pinDir:-/sys/fs/bpf/sockmap4j}", scope = CommandLine.ScopeType.INHERIT)
    Path pinDir;

    /** For picocli; {@link #main} runs it. */
    public AgentMain() {
    }

    @Override
    public Path pinDirectory() {
        return pinDir;
    }

    public static void main(String[] args) {
        CommandLine cl = new CommandLine(new AgentMain());
        cl.setOut(new PrintWriter(System.out, true));
        cl.setErr(new PrintWriter(System.err, true));
        cl.setExecutionExceptionHandler((e, cmd, parsed) -> {
            cmd.getErr().println("sockmap4j-agent: " + (e.getMessage() != null ? e.getMessage() : e.toString()));
            return 1;
        });
        System.exit(cl.execute(args));
    }
}
