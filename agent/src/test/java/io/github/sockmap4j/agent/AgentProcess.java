package io.github.sockmap4j.agent;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;

/**
 * A node agent of pin directory args[0] attached to cgroup args[1] (policy file args[2], or
 * "-"). Prints fds= (its open descriptors once started), then ready=true|false at every change
 * of {@link NodeAgent#isReady()}, and stops on a line "quit".
 */
final class AgentProcess {
    public static void main(String[] args) throws Exception {
        Path policy = args[2].equals("-") ? null : Path.of(args[2]);
        try (NodeAgent agent = NodeAgent.start(new NodeAgent.Options(Path.of(args[0]),
                java.util.List.of(Path.of(args[1])), policy, 1024, false))) {
            try (var fds = java.nio.file.Files.list(Path.of("/proc/self/fd"))) {
                System.out.println("fds=" + fds.count());
            }
            Thread watch = new Thread(() -> {
                boolean last = !agent.isReady();
                while (true) {
                    boolean now = agent.isReady();
                    if (now != last) {
                        System.out.println("ready=" + now);
                        last = now;
                    }
                    try {
                        Thread.sleep(20);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            }, "readiness");
            watch.setDaemon(true);
            watch.start();
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            String line;
            while ((line = in.readLine()) != null && !line.equals("quit")) {
                // wait
            }
        }
    }
}
