package io.github.sockmap4j.colocated.grpc;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.colocated.MessageRing;
import io.github.sockmap4j.colocated.SharedRegion;
import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ServerCalls;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;
import org.junit.jupiter.api.Test;

/**
 * A server end that writes what it likes into the rings (no root): the client's connection to it
 * ends with UNAVAILABLE and the reason, a call on it fails at once instead of at its deadline, the
 * connection's thread goes, and another connection of the same process goes on serving.
 */
class PeerMisbehavesTest {
    private static final long CAPACITY = 1 << 16;

    private static byte[] frame(int streamId, byte[] rest) {
        return new Frames.Writer(streamId).putBytes(rest, 0, rest.length).bytes();
    }

    /** Writes one raw record as the "server" and makes a call that it will never answer properly. */
    private static Status callAfterGarbage(int kind, byte[] payload) throws Exception {
        return callAfterGarbage(kind, payload, 0);
    }

    /** As {@link #callAfterGarbage(int, byte[])}, over a region with a heap of {@code heap} bytes (0: none). */
    static Status callAfterGarbage(int kind, byte[] payload, long heap) throws Exception {
        SharedRegion client = SharedRegion.create("sm4j-grpc-test", CAPACITY, heap);
        try (SharedRegion raw = SharedRegion.open(client.descriptorForPeer(), CAPACITY, heap)) {
            ManagedChannel ch = ColocatedChannelBuilder.forRegion(client, "raw").build();
            try {
                MessageRing.Writer w = raw.outbound().writer();
                MemorySegment p = MemorySegment.ofArray(payload);
                assertTrue(w.offer(kind, p, 0, payload.length));
                StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> ClientCalls
                        .blockingUnaryCall(ch, ColocatedGrpcTest.ECHO,
                                CallOptions.DEFAULT.withDeadlineAfter(20, TimeUnit.SECONDS), new byte[] {1}));
                return e.getStatus();
            } finally {
                ch.shutdownNow();
                assertTrue(ch.awaitTermination(10, TimeUnit.SECONDS));
            }
        }
    }

    @Test
    void anUnknownFrameEndsTheConnection() throws Exception {
        Status s = callAfterGarbage(99, frame(0, new byte[0]));
        assertEquals(Status.Code.UNAVAILABLE, s.getCode());
        assertTrue(s.getDescription().contains("broke the protocol"), s.getDescription());
    }

    @Test
    void headersLargerThanTheyCanBeEndTheConnection() throws Exception {
        byte[] hugeCount = java.nio.ByteBuffer.allocate(4).order(java.nio.ByteOrder.LITTLE_ENDIAN).putInt(1 << 30).array();
        Status s = callAfterGarbage(Frames.HEADERS, frame(1, hugeCount));
        assertEquals(Status.Code.UNAVAILABLE, s.getCode());
        assertTrue(s.getDescription().contains("entries"), s.getDescription());
    }

    @Test
    void aFrameCutShortEndsTheConnection() throws Exception {
        Status s = callAfterGarbage(Frames.TRAILERS, new byte[] {1, 0, 0, 0, 5});
        assertEquals(Status.Code.UNAVAILABLE, s.getCode());
        assertTrue(s.getDescription().contains("ends before"), s.getDescription());
    }

    /** Any frame kind with any bytes: the reader refuses it or ignores it; nothing escapes the connection. */
    @Property(tries = 200)
    void anyFrameIsRefusedOrIgnored(@ForAll @IntRange(min = 0, max = 12) int kind,
                                    @ForAll @Size(max = 64) List<Byte> bytes) throws Exception {
        AtomicReference<Throwable> escaped = new AtomicReference<>();
        Thread.UncaughtExceptionHandler before = Thread.getDefaultUncaughtExceptionHandler();
        Thread.setDefaultUncaughtExceptionHandler((t, e) -> escaped.set(e));
        try {
            SharedRegion client = SharedRegion.create("sm4j-grpc-test", CAPACITY);
            try (SharedRegion raw = SharedRegion.open(client.descriptorForPeer(), CAPACITY)) {
                ManagedChannel ch = ColocatedChannelBuilder.forRegion(client, "raw").build();
                try {
                    byte[] p = new byte[bytes.size()];
                    for (int i = 0; i < p.length; i++) {
                        p[i] = bytes.get(i);
                    }
                    ch.getState(true);
                    raw.outbound().writer().offer(kind, MemorySegment.ofArray(p), 0, p.length);
                    try {
                        ClientCalls.blockingUnaryCall(ch, ColocatedGrpcTest.ECHO,
                                CallOptions.DEFAULT.withDeadlineAfter(200, TimeUnit.MILLISECONDS), new byte[] {1});
                    } catch (StatusRuntimeException expected) {
                        assertTrue(expected.getStatus().getCode() == Status.Code.UNAVAILABLE
                                || expected.getStatus().getCode() == Status.Code.DEADLINE_EXCEEDED
                                || expected.getStatus().getCode() == Status.Code.INTERNAL
                                || expected.getStatus().getCode() == Status.Code.UNKNOWN, expected.toString());
                    }
                } finally {
                    ch.shutdownNow();
                    assertTrue(ch.awaitTermination(10, TimeUnit.SECONDS));
                }
            }
        } finally {
            Thread.setDefaultUncaughtExceptionHandler(before);
        }
        assertNull(escaped.get());
    }

    /** A broken connection takes nothing else with it: the same server's other connection serves on. */
    @Test
    void anotherConnectionOfTheProcessGoesOn() throws Exception {
        ColocatedServer server = ColocatedServer.builder("ok").addService(io.grpc.ServerServiceDefinition
                .builder("test.Colocated").addMethod(ColocatedGrpcTest.ECHO, ServerCalls.asyncUnaryCall((r, o) -> {
                    o.onNext(r);
                    o.onCompleted();
                })).build()).buildColocated();
        Server s = server.server().start();
        SharedRegion good = SharedRegion.create("sm4j-grpc-test", CAPACITY);
        server.attach(SharedRegion.open(good.descriptorForPeer(), CAPACITY));
        ManagedChannel ok = ColocatedChannelBuilder.forRegion(good, "ok").build();
        try {
            assertEquals(Status.Code.UNAVAILABLE, callAfterGarbage(99, frame(0, new byte[0])).getCode());
            assertArrayEquals(new byte[] {4, 2}, ClientCalls.blockingUnaryCall(ok, ColocatedGrpcTest.ECHO,
                    CallOptions.DEFAULT.withDeadlineAfter(10, TimeUnit.SECONDS), new byte[] {4, 2}));
        } finally {
            ok.shutdownNow();
            s.shutdownNow();
            assertTrue(ok.awaitTermination(10, TimeUnit.SECONDS));
            assertTrue(s.awaitTermination(10, TimeUnit.SECONDS));
        }
    }

    /**
     * A server end that never answers (its reader stuck, or a connection without a TCP lifeline
     * whose server is gone): a channel with keepalive ends the connection when its ping goes
     * unanswered, and the call open on it fails UNAVAILABLE then, not at its deadline.
     */
    @Test
    void aServerThatAnswersNoPingEndsTheConnectionAtTheKeepalivesTimeout() throws Exception {
        SharedRegion client = SharedRegion.create("sm4j-grpc-test", CAPACITY);
        try (SharedRegion silent = SharedRegion.open(client.descriptorForPeer(), CAPACITY)) {
            ManagedChannel ch = ColocatedChannelBuilder.forRegion(client, "silent")
                    .keepAliveTime(1, TimeUnit.SECONDS) // taken as 10 s, gRPC's least
                    .keepAliveTimeout(500, TimeUnit.MILLISECONDS)
                    .build();
            try {
                long start = System.nanoTime();
                StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> ClientCalls
                        .blockingUnaryCall(ch, ColocatedGrpcTest.ECHO,
                                CallOptions.DEFAULT.withDeadlineAfter(60, TimeUnit.SECONDS), new byte[] {1}));
                long took = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - start);
                assertEquals(Status.Code.UNAVAILABLE, e.getStatus().getCode(), e.toString());
                assertTrue(e.getStatus().getDescription().contains("Keepalive failed"), e.getStatus().getDescription());
                assertTrue(took >= 9 && took < 40, "ended by the keepalive after its ping, not the deadline: " + took + " s");
                java.util.List<Integer> kinds = new java.util.ArrayList<>();
                silent.inbound().reader().poll((kind, message) -> kinds.add(kind), 100);
                assertTrue(kinds.contains(Frames.PING), "a ping reached the silent end's ring: " + kinds);
            } finally {
                ch.shutdownNow();
                assertTrue(ch.awaitTermination(10, TimeUnit.SECONDS));
            }
        }
    }
}
