package io.github.sockmap4j.agent.control;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * What {@link Listeners} relies on, from this kernel: {@code /proc/net/tcp} and {@code tcp6}
 * print every listening socket before any other, so a read may stop at the first socket that is
 * not listening. Loopback sockets of this process; no root needed.
 */
class ListenersOrderTest {
    @Test
    void theKernelPrintsListenersBeforeOtherSockets() throws Exception {
        InetAddress lo = InetAddress.getLoopbackAddress();
        List<Socket> open = new ArrayList<>();
        try (ServerSocket first = new ServerSocket(0, 50, lo)) {
            for (int i = 0; i < 20; i++) {
                open.add(new Socket(lo, first.getLocalPort()));
                open.add(first.accept());
            }
            // A listener made after the connections: still printed before them.
            try (ServerSocket late = new ServerSocket(0, 50, lo)) {
                int uid = (Integer) Files.getAttribute(Path.of("/proc/self"), "unix:uid");
                long pid = ProcessHandle.current().pid();
                assertEquals(List.of(new Listeners.Listener(uid, lo, late.getLocalPort())),
                        new Listeners().on(late.getLocalPort(), List.of(), pid));
                boolean connections = false;
                for (String file : new String[] {"tcp", "tcp6"}) {
                    List<String> lines = Files.readAllLines(Path.of("/proc/self/net", file));
                    boolean other = false;
                    for (String line : lines.subList(1, lines.size())) {
                        boolean listening = line.trim().split("\\s+")[3].equals("0A");
                        assertTrue(!(other && listening), "a listener after another socket in " + file + ": " + line);
                        other |= !listening;
                    }
                    connections |= other;
                }
                assertTrue(connections, "the connections are printed (the JDK's sockets are IPv6 ones: tcp6)");
            }
        } finally {
            for (Socket s : open) {
                s.close();
            }
        }
    }
}
