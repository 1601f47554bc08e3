package io.github.sockmap4j.arrow.shared;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.testbed.ChildJvm;
import io.github.sockmap4j.testbed.VethPods;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The lending agreement's fallbacks that need processes of their own (root): two ends in two pods
 * (network namespaces joined by a veth pair), where the sender cannot reach the receiver's
 * listener; and a sender of another user, whom the receiver does not let share its memory. Each
 * end says why, and the batch then goes as an Arrow stream over the same connection.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
@Tag("kernel")
class LendingAcrossPodsTest {
    private final List<AutoCloseable> cleanup = new ArrayList<>();

    @AfterEach
    void tearDown() throws Exception {
        for (int i = cleanup.size() - 1; i >= 0; i--) {
            cleanup.get(i).close();
        }
    }

    private static List<String> java(String... args) {
        List<String> cmd = new ArrayList<>(ChildJvm.javaCommand(LendingPeer.class, args));
        cmd.add(1, "--add-opens=java.base/java.nio=ALL-UNNAMED");
        cmd.add(1, "--sun-misc-unsafe-memory-access=allow");
        return cmd;
    }

    private static void bothSay(ChildJvm receiver, ChildJvm sender, String reason) throws InterruptedException {
        String sent = sender.expect("FALLBACK ", 60);
        assertTrue(sent.startsWith(reason), sent + "\n" + sender.output());
        String got = receiver.expect("FALLBACK ", 60);
        assertTrue(got.startsWith(reason), got + "\n" + receiver.output());
        assertEquals(Integer.toString(LendingPeer.ROWS), sender.expect("ROWS ", 30), sender.output());
        assertEquals(Integer.toString(LendingPeer.ROWS), receiver.expect("ROWS ", 30),
                "the batch went as a stream over the same connection\n" + receiver.output());
        assertEquals(0, sender.waitFor(30), sender.output());
        assertEquals(0, receiver.waitFor(30), receiver.output());
    }

    @Test
    void endsInTwoPodsCannotReachEachOthersListenerAndStream() throws Exception {
        VethPods pods = VethPods.create("al", "10.231.8.1", "10.231.8.2");
        cleanup.add(pods);
        ChildJvm receiver = ChildJvm.start(VethPods.in(pods.nsA, java("receiver-at", pods.addrA)));
        cleanup.add(receiver);
        String port = receiver.expect("PORT ", 30);
        ChildJvm sender = ChildJvm.start(VethPods.in(pods.nsB, java("sender", pods.addrA, port)));
        cleanup.add(sender);
        bothSay(receiver, sender, Lending.Reason.NO_BROKER.name());
    }

    /**
     * Ends in two pods given one broker directory (as pods that mount one directory): the sender
     * reaches the receiver's listener there, and the batch is lent; nothing is left in the
     * directory once the agreement is over.
     */
    @Test
    void endsInTwoPodsGivenOneBrokerDirectoryLend() throws Exception {
        VethPods pods = VethPods.create("ab", "10.231.10.1", "10.231.10.2");
        cleanup.add(pods);
        java.nio.file.Path parent = java.nio.file.Files.createTempDirectory("sm4j-lending-broker");
        java.nio.file.Path dir = parent.resolve("broker");
        cleanup.add(() -> {
            if (java.nio.file.Files.exists(dir)) {
                try (java.util.stream.Stream<java.nio.file.Path> left = java.nio.file.Files.list(dir)) {
                    for (java.nio.file.Path p : left.toList()) {
                        java.nio.file.Files.delete(p);
                    }
                }
                java.nio.file.Files.delete(dir);
            }
            java.nio.file.Files.delete(parent);
        });
        String flag = "-D" + io.github.sockmap4j.colocated.BrokerDirectory.PROPERTY + "=" + dir;
        List<String> receiving = java("receiver-at", pods.addrA);
        receiving.add(1, flag);
        ChildJvm receiver = ChildJvm.start(VethPods.in(pods.nsA, receiving));
        cleanup.add(receiver);
        String port = receiver.expect("PORT ", 30);
        List<String> sending = java("sender", pods.addrA, port);
        sending.add(1, flag);
        ChildJvm sender = ChildJvm.start(VethPods.in(pods.nsB, sending));
        cleanup.add(sender);
        assertEquals("", sender.expect("LENT", 60), sender.output());
        assertEquals("", receiver.expect("LENT", 60), receiver.output());
        assertEquals(Integer.toString(LendingPeer.ROWS), sender.expect("ROWS ", 30), sender.output());
        assertEquals(Integer.toString(LendingPeer.ROWS), receiver.expect("ROWS ", 30), receiver.output());
        assertEquals(0, sender.waitFor(30), sender.output());
        assertEquals(0, receiver.waitFor(30), receiver.output());
        try (java.util.stream.Stream<java.nio.file.Path> left = java.nio.file.Files.list(dir)) {
            assertEquals(List.of(), left.toList(), "the listener's socket and lock went with the agreement");
        }
    }

    @Test
    void aSenderOfAnotherUserIsNotAllowedToShareAndStreams() throws Exception {
        ChildJvm receiver = ChildJvm.start(java("receiver-at", "127.0.0.1"));
        cleanup.add(receiver);
        String port = receiver.expect("PORT ", 30);
        ChildJvm sender = ChildJvm.startAsUser(65534, java("sender", "127.0.0.1", port));
        cleanup.add(sender);
        bothSay(receiver, sender, Lending.Reason.NOT_ALLOWED.name());
    }
}
