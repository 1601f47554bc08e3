package io.github.sockmap4j.netty;

import io.github.sockmap4j.spi.RawSockets;
import io.github.sockmap4j.spi.WriteCredit;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufHolder;
import io.netty.channel.ChannelDuplexHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelPromise;
import io.netty.channel.FileRegion;
import io.netty.channel.PendingWriteQueue;
import io.netty.channel.epoll.EpollSocketChannel;
import java.nio.channels.ClosedChannelException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Last before the socket in an epoll socket channel's outbound path: writes go to the socket
 * only as far as the receiver's credit lets them (docs/in-flight-bound.md), so that a slow
 * receiver holds this writer on the fast path instead of the kernel sending it by TCP. Writes
 * past the credit wait in a {@link PendingWriteQueue}, whose bytes count as the channel's
 * pending outbound bytes: the channel turns unwritable above its high water mark and writable
 * again as the credit returns, the back-pressure Netty, gRPC and Arrow already follow. The
 * credit is checked again on the channel's event loop with a back-off from 50 µs to 1 ms: no
 * thread of its own, and no system call while the receiver publishes its reads. Every decision
 * (what goes, what is held, when to stop holding) is {@link WriteCredit}'s, the library's one
 * credit rule, the one a blocking {@code SockmapChannel} write follows; this handler carries
 * them out.
 *
 * <p>A receiver that closes or dies lets everything through (the writes then meet the close), and
 * so does one that reads nothing at all for 200 ms, until it reads again (the kernel's bound then
 * decides, with TCP's buffers, so that nothing waits on a peer that waits on this channel);
 * closing this channel flushes what is held to the socket first, as far as the socket takes it,
 * as a plain TCP channel would have.
 *
 * <p><b>Note:</b> not sharable: one per channel, used from its event loop.
 */
final class HoldForCredit extends ChannelDuplexHandler {
    static final String NAME = "sockmap4j-hold-for-credit";
    private static final Logger LOG = LoggerFactory.getLogger(HoldForCredit.class);
    private final RawSockets sockets;
    private final boolean serverSide;
    private WriteCredit credit;
    private PendingWriteQueue held;
    private ScheduledFuture<?> retry;
    private volatile boolean holding;
    /** The largest part of a file region read into one buffer. */
    private static final int MAX_PART = 1 << 20;
    /** Whether the file region at the head of {@link #held} has been written in part. */
    private boolean headBegun;

    HoldForCredit(RawSockets sockets, boolean serverSide) {
        this.sockets = sockets;
        this.serverSide = serverSide;
    }

    /**
     * How long after the connect a write looks for the credit again when there was none at the
     * connect: the peer's end enters the socket map as the kernel takes the handshake's last
     * ACK, which can come after this end's connect completed; without a second look, a write
     * larger than the bound found no credit and went past the bound by TCP.
     */
    static final long LATE_CREDIT_NANOS = TimeUnit.SECONDS.toNanos(1);
    /** Whether the credit was looked for once. */
    private boolean looked;
    /** Until when ({@link System#nanoTime()}) a write without credit looks for it again; 0 once done. */
    private long lookUntil;
    /** Second looks left: each is a few system calls, on a connection that may never have credit. */
    private int looksLeft = 16;
    /** Bytes written before the credit was found: they count as sent once it is. */
    private long sentWithout;

    /**
     * Quick ACKs on for the handshake, whatever the channel's options say: with them off (Vert.x's
     * default sets TCP_QUICKACK to false on every client socket), Linux delays the handshake's
     * last ACK until the first data or the delayed-ACK timer, and the server's end enters the
     * socket map only then, after this end's first write went without credit. The option only
     * times TCP's ACKs, which redirected data does not produce; the kernel clears it again as it
     * sees fit.
     */
    @Override
    public void connect(ChannelHandlerContext ctx, java.net.SocketAddress remote, java.net.SocketAddress local,
                        ChannelPromise promise) {
        if (ctx.channel() instanceof EpollSocketChannel ch) {
            try {
                ch.config().setTcpQuickAck(true);
            } catch (RuntimeException e) {
                LOG.debug("{}: quick ACKs stay as set: {}", ch, e.toString());
            }
        }
        ctx.connect(remote, local, promise);
    }

    @Override
    public void channelActive(ChannelHandlerContext ctx) throws Exception {
        look(ctx);
        ctx.fireChannelActive();
    }

    /**
     * The first look for the credit: at the connect, or at the first write where this handler
     * did not see the connect (a handler put first after it swallowed the event).
     */
    private void look(ChannelHandlerContext ctx) {
        if (looked || !(ctx.channel() instanceof EpollSocketChannel)) {
            return;
        }
        looked = true;
        if (resolve(ctx) == null) {
            lookUntil = System.nanoTime() + LATE_CREDIT_NANOS;
        }
    }

    /** Looks the credit up in the kernel's maps; null when this connection has none (yet). */
    private WriteCredit resolve(ChannelHandlerContext ctx) {
        EpollSocketChannel ch = (EpollSocketChannel) ctx.channel();
        try {
            credit = sockets.writeCredit(ch.fd().intValue(), serverSide);
        } catch (java.io.IOException | RuntimeException e) {
            LOG.debug("{} writes without credit: {}", ch, e.toString());
        }
        if (credit != null) {
            if (held == null) {
                held = new PendingWriteQueue(ctx);
            }
            lookUntil = 0;
        }
        return credit;
    }

    /** At a write without credit, within {@link #LATE_CREDIT_NANOS} of the connect: the credit, if there is one now. */
    private WriteCredit lateCredit(ChannelHandlerContext ctx) {
        if (System.nanoTime() - lookUntil > 0 || --looksLeft < 0 || !ctx.channel().isActive()) {
            lookUntil = 0;
            return null;
        }
        WriteCredit c = resolve(ctx);
        if (c != null && sentWithout > 0) {
            c.sent(sentWithout); // the receiver counts them as read when it reads them
        }
        return c;
    }

    /** Whether writes are held for credit now: from any thread (for tests and diagnostics). */
    boolean holding() {
        return holding;
    }

    /** The same, on the event loop, from the queue itself. */
    private boolean heldNow() {
        boolean h = held != null && !held.isEmpty();
        holding = h;
        return h;
    }

    @Override
    public void write(ChannelHandlerContext ctx, Object msg, ChannelPromise promise) {
        if (!looked && ctx.channel().isActive()) {
            look(ctx);
        }
        WriteCredit c = credit;
        long size = size(msg);
        if (c == null && lookUntil != 0) {
            c = lateCredit(ctx);
            if (c == null && size > 0 && lookUntil != 0) {
                sentWithout += size;
            }
        }
        if (c == null) {
            ctx.write(msg, promise);
            return;
        }
        if (held.isEmpty() && c.admit(size, splittable(msg))) {
            ctx.write(msg, promise);
            return;
        }
        held.add(msg, promise);
        holding = true;
    }

    @Override
    public void flush(ChannelHandlerContext ctx) {
        if (heldNow()) {
            drain(ctx, false);
        }
        ctx.flush();
        if (heldNow()) {
            scheduleRetry(ctx);
        }
    }

    /**
     * Writes what the credit covers, splitting a buffer when a useful part of it fits; all of
     * it when {@code force} or the receiver has gone. Returns whether anything was written.
     */
    private boolean drain(ChannelHandlerContext ctx, boolean force) {
        boolean wrote = false;
        WriteCredit c = credit;
        while (!held.isEmpty()) {
            Object msg = held.current();
            long size = size(msg);
            long n = c.next(size, splittable(msg), force);
            if (n == WriteCredit.WHOLE) {
                if (size > 0) {
                    c.sent(size);
                }
                writeHead(ctx);
                wrote = true;
            } else if (n > 0 && msg instanceof ByteBuf buf) {
                ctx.write(buf.readRetainedSlice((int) n), ctx.voidPromise());
                c.sent(n);
                wrote = true;
            } else if (n > 0 && msg instanceof FileRegion region && writePart(ctx, region, n)) {
                wrote = true;
            } else {
                break;
            }
        }
        if (wrote && held.isEmpty()) {
            c.drained();
        }
        return wrote;
    }

    /** A buffer or a file region: either goes in parts the credit covers. */
    private static boolean splittable(Object msg) {
        return msg instanceof ByteBuf || msg instanceof FileRegion;
    }

    /**
     * Writes {@code length} more bytes of the head region, read from its file into a buffer.
     * Parts sent as regions of their own (sendfile) were tried first: in NettyFileRegionCreditTest
     * they met the kernel's bound after 166 KB and the rest went by TCP, where buffers stayed on
     * the redirect (100%); why sendfile's parts did was not found.
     */
    private boolean writePart(ChannelHandlerContext ctx, FileRegion region, long length) {
        ByteBuf part = FileRegionChunks.read(region, (int) Math.min(length, MAX_PART), ctx.alloc());
        if (part == null) {
            return false;
        }
        int n = part.readableBytes();
        ctx.write(part, ctx.voidPromise());
        headBegun = true;
        credit.sent(n);
        return true;
    }

    /**
     * Writes the head of {@link #held} with its promise: whole, or (a file region begun in parts)
     * its rest in parts, the last with the promise.
     */
    private void writeHead(ChannelHandlerContext ctx) {
        if (headBegun && held.current() instanceof FileRegion region) {
            headBegun = false;
            while (region.transferred() < region.count()) {
                ByteBuf part = FileRegionChunks.read(region, MAX_PART, ctx.alloc());
                if (part == null) {
                    break;
                }
                ctx.write(part, ctx.voidPromise());
            }
            long rest = region.count() - region.transferred();
            ChannelPromise promise = held.remove(); // releases the region: its bytes are in the parts
            if (rest > 0) {
                promise.tryFailure(new java.io.IOException("the file of a region ended " + rest
                        + " bytes before the region did"));
            } else {
                ctx.write(ctx.alloc().buffer(0), promise);
            }
            return;
        }
        headBegun = false;
        held.removeAndWrite();
    }

    private void scheduleRetry(ChannelHandlerContext ctx) {
        if (retry == null) {
            retry = ctx.executor().schedule(() -> retry(ctx), credit.retryNanos(), TimeUnit.NANOSECONDS);
        }
    }

    private void retry(ChannelHandlerContext ctx) {
        retry = null;
        if (!heldNow() || !ctx.channel().isActive()) {
            return;
        }
        WriteCredit.Retry what = credit.retry();
        if (what == WriteCredit.Retry.WAIT) {
            scheduleRetry(ctx);
            return;
        }
        boolean wrote = drain(ctx, what == WriteCredit.Retry.DRAIN_ALL);
        if (wrote) {
            ctx.flush();
        }
        credit.retried(wrote);
        if (heldNow()) {
            scheduleRetry(ctx);
        }
    }

    /** Bytes a message puts on the wire; -1 for one that is not data (passed as it comes). */
    private static long size(Object msg) {
        if (msg instanceof ByteBuf buf) {
            return buf.readableBytes();
        }
        if (msg instanceof ByteBufHolder h) {
            return h.content().readableBytes();
        }
        if (msg instanceof FileRegion r) {
            return r.count() - r.transferred();
        }
        return -1;
    }

    @Override
    public void close(ChannelHandlerContext ctx, ChannelPromise promise) {
        try {
            if (heldNow()) {
                drain(ctx, true);
                ctx.flush();
            }
        } finally {
            cancelRetry();
            ctx.close(promise); // whatever the flush met, the channel closes
        }
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) throws Exception {
        failHeld();
        ctx.fireChannelInactive();
    }

    /**
     * Taken out of the pipeline of an open channel (Vert.x's HTTP client clears the pipeline of a
     * new connection but for its TLS handler): sends what it held, as at a close, and puts a
     * successor first that goes on with the same credit. A closed channel's handlers just go.
     */
    @Override
    public void handlerRemoved(ChannelHandlerContext ctx) {
        if (ctx.channel().isActive() && ctx.pipeline().get(HoldForCredit.class) == null) {
            if (heldNow()) {
                drain(ctx, true);
            }
            ctx.flush();
            cancelRetry();
            HoldForCredit next = new HoldForCredit(sockets, serverSide);
            next.looked = looked;
            next.credit = credit;
            next.lookUntil = lookUntil;
            next.looksLeft = looksLeft;
            next.sentWithout = sentWithout;
            ctx.pipeline().addFirst(NAME, next);
            return;
        }
        failHeld();
    }

    /** A successor put back into an open channel's pipeline holds in a queue of its own. */
    @Override
    public void handlerAdded(ChannelHandlerContext ctx) {
        if (credit != null && held == null) {
            held = new PendingWriteQueue(ctx);
        }
    }

    private void failHeld() {
        cancelRetry();
        if (held != null && !held.isEmpty()) {
            held.removeAndFailAll(new ClosedChannelException());
        }
        headBegun = false;
        holding = false;
    }

    private void cancelRetry() {
        if (retry != null) {
            retry.cancel(false);
            retry = null;
        }
    }
}
