package io.github.sockmap4j.testsupport;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import jdk.jfr.Recording;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingFile;

/**
 * The {@code io.github.sockmap4j.Connection} JFR events of the connections made while this
 * ran: one per end of each connection made by the transport (a stock channel makes none), with
 * whether the kernel had it on the redirect. Where a framework gives no hold of its channels,
 * this witnesses whose they were.
 */
public final class ConnectionEvents implements AutoCloseable {
    private final Recording recording = new Recording();

    private ConnectionEvents() {
        recording.enable("io.github.sockmap4j.Connection");
        recording.start();
    }

    public static ConnectionEvents start() {
        return new ConnectionEvents();
    }

    /** Stops the recording and returns its connection events. */
    public List<RecordedEvent> stop() {
        recording.stop();
        Path file = null;
        try {
            file = Files.createTempFile("sockmap4j-connections", ".jfr");
            recording.dump(file);
            return RecordingFile.readAllEvents(file).stream()
                    .filter(e -> e.getEventType().getName().equals("io.github.sockmap4j.Connection")).toList();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } finally {
            recording.close();
            if (file != null) {
                try {
                    Files.deleteIfExists(file);
                } catch (IOException e) {
                    // a temporary file; nothing else to do
                }
            }
        }
    }

    @Override
    public void close() {
        recording.close();
    }
}
