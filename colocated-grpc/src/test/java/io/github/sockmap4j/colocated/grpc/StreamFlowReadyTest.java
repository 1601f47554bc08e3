package io.github.sockmap4j.colocated.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.colocated.MessageRing;
import io.github.sockmap4j.colocated.SharedRegion;
import io.grpc.Status;
import io.grpc.internal.StatsTraceContext;
import io.grpc.internal.StreamListener;
import java.io.ByteArrayInputStream;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A stream that said it was not ready tells its listener onReady once it is, whatever made it not
 * ready: a window that ran out, or a message queued while another thread was writing the stream's
 * frames (which then sends it). An application that writes only while ready, from onReady, stops at
 * the first false and waits for that call; without it a server stream stopped for good, both ends
 * idle, its caller waiting for the next message.
 */
class StreamFlowReadyTest {
    /** Rings of 64 KiB: five messages of 12 KiB fill one. */
    private static final long CAPACITY = 1 << 16;
    private static final int MESSAGE = 12 << 10;

    private SharedRegion mine;
    private SharedRegion theirs;
    private ColocatedConnection connection;
    private final CountDownLatch ready = new CountDownLatch(1);
    private final AtomicInteger readyCalls = new AtomicInteger();
    private StreamFlow flow;

    @BeforeEach
    void open() throws Exception {
        mine = SharedRegion.create("sm4j-ready-test", CAPACITY);
        theirs = SharedRegion.open(mine.descriptorForPeer(), CAPACITY);
        connection = new ColocatedConnection(mine, "ready-test");
        flow = new StreamFlow(1, connection, 1 << 20) {
            @Override
            StreamListener listener() {
                return new StreamListener() {
                    @Override
                    public void messagesAvailable(MessageProducer producer) {
                    }

                    @Override
                    public void onReady() {
                        readyCalls.incrementAndGet();
                        ready.countDown();
                    }
                };
            }

            @Override
            void deliverEnd() {
            }
        };
    }

    @AfterEach
    void close() {
        connection.close(Status.CANCELLED); // never started: it unmaps here
        theirs.close();
    }

    private boolean send() {
        return flow.writeMessage(new ByteArrayInputStream(new byte[MESSAGE]), StatsTraceContext.NOOP);
    }

    @Test
    void aMessageQueuedWhileAnotherThreadWritesIsFollowedByOnReady() throws Exception {
        // one thread writes until the ring is full and waits for room there, still the stream's writer
        Thread first = Thread.ofPlatform().start(() -> {
            for (int i = 0; i < 6; i++) {
                send();
            }
        });
        MessageRing.Reader peer = theirs.inbound().reader();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        // its writes are quiet (a flush would follow them): the ring shows them once the writer, full, waits
        while (!peer.hasMessages()) {
            assertTrue(System.nanoTime() < deadline, "the first writer never filled the ring");
            peer.awaitMessages(TimeUnit.MILLISECONDS.toNanos(10));
        }
        assertTrue(first.isAlive(), "the sixth message waits for room");

        // another thread's message is queued behind it, for the writing thread to send: not ready meanwhile
        assertTrue(send());
        assertFalse(flow.isReady());
        assertEquals(0, readyCalls.get());

        // the peer reads: the first thread sends its message and the queued one, and the stream is ready
        int read = 0;
        while (read < 7) {
            assertTrue(System.nanoTime() < deadline, "read " + read + " of 7 messages");
            int n = peer.pollOwned((kind, m) -> { }, 64);
            read += n;
            if (n == 0) {
                peer.awaitMessages(TimeUnit.MILLISECONDS.toNanos(10));
            }
            connection.flush(); // as gRPC flushes after each message
        }
        first.join(TimeUnit.SECONDS.toMillis(20));
        assertFalse(first.isAlive());
        assertTrue(ready.await(20, TimeUnit.SECONDS), "told not ready, never told ready");
        assertTrue(flow.isReady());
    }

    @Test
    void aWindowThatRanOutAndOpensAgainIsFollowedByOnReady() throws Exception {
        Thread reader = Thread.ofPlatform().start(() -> {
            MessageRing.Reader peer = theirs.inbound().reader();
            try {
                while (!Thread.currentThread().isInterrupted()) {
                    if (peer.pollOwned((kind, m) -> { }, 64) == 0) {
                        peer.awaitMessages(TimeUnit.MILLISECONDS.toNanos(10));
                    }
                }
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        try {
            long sent = 0;
            while (flow.isReady()) {
                assertTrue(send());
                connection.flush();
                sent += MESSAGE;
            }
            assertTrue(sent >= StreamFlow.WINDOW, "stopped after " + sent + " bytes");
            assertEquals(0, readyCalls.get());
            flow.windowOpened((int) sent);
            assertTrue(ready.await(20, TimeUnit.SECONDS), "the window opened, never told ready");
            assertEquals(1, readyCalls.get());
        } finally {
            reader.interrupt();
            reader.join();
        }
    }
}
