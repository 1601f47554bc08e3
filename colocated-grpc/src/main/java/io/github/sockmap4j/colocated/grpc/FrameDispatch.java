package io.github.sockmap4j.colocated.grpc;

import com.google.common.util.concurrent.ListenableFuture;
import com.google.common.util.concurrent.SettableFuture;
import io.grpc.InternalChannelz.SocketStats;
import io.grpc.Status;

/**
 * The frames both ends of a connection take alike (a stream's message pieces, its window, a
 * cancel, a ping), handed to the stream's {@link StreamFlow}; each end adds its own kinds.
 */
abstract class FrameDispatch implements ColocatedConnection.Handler {
    final ColocatedConnection connection;
    final int maxInboundMetadata;

    FrameDispatch(ColocatedConnection connection, int maxInboundMetadata) {
        this.connection = connection;
        this.maxInboundMetadata = maxInboundMetadata;
    }

    /** Stream {@code id}'s flow; null where it ended or was never open here (its frames are dropped). */
    abstract StreamFlow flowOf(int id);

    /** The other end cancelled stream {@code id}. */
    abstract void cancelled(int id, Status status);

    /** A frame of a kind only this end takes; false where this end takes no such kind. */
    abstract boolean onOwnFrame(int kind, int id, Frames.Reader f) throws Exception;

    @Override
    public final void onFrame(int kind, Frames.Reader f) throws Exception {
        int id = f.getInt("stream id");
        switch (kind) {
            case Frames.MESSAGE -> {
                boolean more = f.getByte("flags") == Frames.MORE;
                Frames.Slice bytes = f.restSlice();
                StreamFlow s = flowOf(id);
                if (s != null) {
                    s.messageFrame(more, bytes);
                }
            }
            case Frames.WINDOW -> {
                int bytes = f.getInt("window");
                f.end("WINDOW");
                StreamFlow s = flowOf(id);
                if (s != null) {
                    s.windowOpened(bytes);
                }
            }
            case Frames.CANCEL -> {
                int code = f.getInt("status code");
                String description = f.getString("status description", maxInboundMetadata);
                f.end("CANCEL");
                cancelled(id, StreamFlow.statusOf(code, description));
            }
            case Frames.PING -> {
                long data = f.getLong("ping");
                f.end("PING");
                connection.write(Frames.PONG, new Frames.Writer(0).putLong(data).bytes());
            }
            default -> {
                if (!onOwnFrame(kind, id, f)) {
                    throw new Frames.ProtocolException("a frame of kind " + kind + " this end does not take");
                }
            }
        }
    }

    /** No socket statistics: there is no socket. */
    static ListenableFuture<SocketStats> noStats() {
        SettableFuture<SocketStats> f = SettableFuture.create();
        f.set(null);
        return f;
    }
}
