package io.github.sockmap4j.colocated.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.sockmap4j.colocated.SharedRegion;
import io.grpc.Status;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * {@link ColocatedConnection#afterReads}: a task a frame's handler asks for runs once the reader has
 * taken the frames the ring held (a stream's end that came behind its message is taken before a
 * cancel its message's callback asked for, as an HTTP/2 event loop runs a cancel after what it
 * read); one from another thread wakes a sleeping reader; one on an ended connection runs at once.
 */
class AfterReadsTest {
    private SharedRegion mine;
    private SharedRegion theirs;
    private ColocatedConnection reader;
    private ColocatedConnection writer;
    private final List<String> seen = new CopyOnWriteArrayList<>();

    @BeforeEach
    void connect() throws Exception {
        mine = SharedRegion.create("sm4j-after-reads", 1 << 20);
        theirs = SharedRegion.open(mine.descriptorForPeer(), 1 << 20);
        reader = new ColocatedConnection(mine, "reader");
        writer = new ColocatedConnection(theirs, "writer");
        writer.start(new ColocatedConnection.Handler() {
            @Override
            public void onFrame(int kind, Frames.Reader frame) {
            }

            @Override
            public void onClosed(Status status) {
            }
        });
    }

    @AfterEach
    void close() {
        reader.close(Status.OK);
        writer.close(Status.OK);
    }

    private void startReading(Runnable onFirst) {
        reader.start(new ColocatedConnection.Handler() {
            @Override
            public void onFrame(int kind, Frames.Reader frame) {
                seen.add("frame " + kind);
                if (seen.size() == 1) {
                    onFirst.run();
                }
            }

            @Override
            public void onClosed(Status status) {
            }
        });
    }

    /**
     * A connection closed before it starts (a server shut down as a connection was attached) tells
     * the handler it starts with, once, and starts no reader: a transport never told would keep
     * its server from terminating.
     */
    @Test
    void aConnectionClosedBeforeItStartsTellsItsHandlerOnce() {
        reader.close(Status.UNAVAILABLE.withDescription("shut down"));
        List<Status> told = new CopyOnWriteArrayList<>();
        reader.start(new ColocatedConnection.Handler() {
            @Override
            public void onFrame(int kind, Frames.Reader frame) {
                seen.add("frame " + kind);
            }

            @Override
            public void onClosed(Status status) {
                told.add(status);
            }
        });
        assertEquals(1, told.size(), "told at its start: " + told);
        assertEquals("shut down", told.get(0).getDescription());
        reader.close(Status.OK);
        assertEquals(1, told.size(), "told once");
        assertTrue(Thread.getAllStackTraces().keySet().stream().noneMatch(t -> t.getName().equals("sockmap4j-colocated-reader")),
                "no reader thread");
    }

    @Test
    void aTaskAskedForByAFramesHandlerRunsAfterTheFramesBehindIt() throws Exception {
        // a message and the stream's end, both in the ring before the reader starts
        assertTrue(writer.write(Frames.MESSAGE, new Frames.Writer(1).bytes()));
        assertTrue(writer.write(Frames.TRAILERS, new Frames.Writer(1).bytes()));
        CountDownLatch ran = new CountDownLatch(1);
        startReading(() -> reader.afterReads(() -> {
            seen.add("task");
            ran.countDown();
        }));
        assertTrue(ran.await(10, TimeUnit.SECONDS), "the task ran: " + seen);
        assertEquals(List.of("frame " + Frames.MESSAGE, "frame " + Frames.TRAILERS, "task"), seen);
    }

    @Test
    void aTaskFromAnotherThreadWakesTheSleepingReader() throws Exception {
        startReading(() -> { });
        assertTrue(writer.write(Frames.MESSAGE, new Frames.Writer(1).bytes()));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (seen.isEmpty()) {
            assertTrue(System.nanoTime() < deadline, "the frame was read");
            Thread.onSpinWait();
        }
        CountDownLatch ran = new CountDownLatch(1);
        String[] on = new String[1];
        reader.afterReads(() -> {
            on[0] = Thread.currentThread().getName();
            ran.countDown();
        });
        assertTrue(ran.await(10, TimeUnit.SECONDS), "the reader woke for the task");
        assertEquals("sockmap4j-colocated-reader", on[0], "run by the reader");
    }

    @Test
    void aTaskOnAnEndedConnectionRunsAtOnce() {
        startReading(() -> { });
        reader.close(Status.UNAVAILABLE);
        String[] on = new String[1];
        reader.afterReads(() -> on[0] = Thread.currentThread().getName());
        assertEquals(Thread.currentThread().getName(), on[0]);
    }
}
