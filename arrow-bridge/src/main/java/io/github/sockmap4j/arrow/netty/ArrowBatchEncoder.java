package io.github.sockmap4j.arrow.netty;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.CompositeByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelOutboundHandlerAdapter;
import io.netty.channel.ChannelPromise;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.WritableByteChannel;
import org.apache.arrow.vector.ipc.WriteChannel;
import org.apache.arrow.vector.ipc.message.ArrowRecordBatch;
import org.apache.arrow.vector.ipc.message.MessageSerializer;
import org.apache.arrow.vector.types.pojo.Schema;

/**
 * Writes Arrow IPC stream messages: a {@link Schema}, then {@link ArrowRecordBatch}es (from
 * {@code new VectorUnloader(root).getRecordBatch()}). A batch's body buffers go to the channel as
 * {@code ByteBuf} views of their {@code ArrowBuf} memory, not copied; only the small flatbuffer
 * header and padding are heap buffers.
 *
 * <p>Ownership: a written batch belongs to this handler, which closes it (releasing its buffers)
 * once the write completes or fails. Other messages pass through unchanged.
 */
public final class ArrowBatchEncoder extends ChannelOutboundHandlerAdapter {
    @Override
    public void write(ChannelHandlerContext ctx, Object msg, ChannelPromise promise) throws IOException {
        if (msg instanceof ArrowRecordBatch batch) {
            ByteBuf out;
            try {
                out = encode(ctx, w -> MessageSerializer.serialize(w, batch));
            } catch (IOException | RuntimeException e) {
                batch.close();
                throw e;
            }
            promise.addListener(f -> batch.close());
            ctx.write(out, promise);
        } else if (msg instanceof Schema schema) {
            ctx.write(encode(ctx, w -> MessageSerializer.serialize(w, schema)), promise);
        } else {
            ctx.write(msg, promise);
        }
    }

    interface Serializer {
        void write(WriteChannel w) throws IOException;
    }

    private static ByteBuf encode(ChannelHandlerContext ctx, Serializer s) throws IOException {
        CompositeByteBuf out = ctx.alloc().compositeBuffer(Integer.MAX_VALUE);
        try {
            s.write(new WriteChannel(new Gather(out)));
            return out;
        } catch (IOException | RuntimeException e) {
            out.release();
            throw e;
        }
    }

    /** Direct buffers (Arrow's memory) join as views; heap ones (header, padding) are copied. */
    private record Gather(CompositeByteBuf out) implements WritableByteChannel {
        @Override
        public int write(ByteBuffer src) {
            int n = src.remaining();
            if (n == 0) {
                return 0;
            }
            ByteBuf part = src.isDirect() ? Unpooled.wrappedBuffer(src.slice())
                    : Unpooled.copiedBuffer(src.duplicate());
            src.position(src.limit());
            out.addComponent(true, part);
            return n;
        }

        @Override
        public boolean isOpen() {
            return true;
        }

        @Override
        public void close() {
        }
    }
}
