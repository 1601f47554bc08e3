package io.github.sockmap4j.netty;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.FileRegion;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.WritableByteChannel;

/**
 * Parts of a {@link FileRegion}, of any kind, so that a file is sent in pieces its receiver's
 * credit covers instead of whole: a region larger than the in-flight bound would otherwise meet
 * the kernel's bound mid-file and go on by TCP (measured: 9% of a file sent as regions to a slow
 * reader redirected; a user's own {@code FileRegion} in Netty's {@code SocketFileRegionTest},
 * 8.7 MB of 21 MB by TCP). A part is what the region's own {@link FileRegion#transferTo} writes
 * into a direct buffer that takes at most the part's length, from what it has transferred so far
 * (which that call advances, as a transport's write does): a copy in user space that sendfile(2)
 * avoids, made only while the receiver's credit is short of the region; a region the credit
 * covers goes whole, by sendfile where it is a file's.
 */
final class FileRegionChunks {
    private FileRegionChunks() {
    }

    /**
     * The next at most {@code length} bytes of {@code region}, in a direct buffer; null where it
     * gave none (it ended, or its file is shorter than it says).
     */
    static ByteBuf read(FileRegion region, int length, ByteBufAllocator alloc) {
        ByteBuf buf = alloc.directBuffer(length, length);
        Into into = new Into(buf);
        try {
            while (buf.isWritable() && region.transferred() < region.count()) {
                if (region.transferTo(into, region.transferred()) <= 0) {
                    break;
                }
            }
        } catch (IOException e) {
            // The file ended before the region did: what was read goes, the rest fails the write.
        }
        if (!buf.isReadable()) {
            buf.release();
            return null;
        }
        return buf;
    }

    /** A channel that writes into a buffer and takes no more than its room. */
    private static final class Into implements WritableByteChannel {
        private final ByteBuf buf;

        Into(ByteBuf buf) {
            this.buf = buf;
        }

        @Override
        public int write(ByteBuffer src) {
            int n = Math.min(src.remaining(), buf.writableBytes());
            if (n > 0) {
                buf.writeBytes(src.slice(src.position(), n));
                src.position(src.position() + n);
            }
            return n;
        }

        @Override
        public boolean isOpen() {
            return true;
        }

        @Override
        public void close() {
            // the buffer is the caller's
        }
    }
}
