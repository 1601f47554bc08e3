package io.github.sockmap4j;

import io.github.sockmap4j.internal.flow.ChannelCredit;
import io.github.sockmap4j.linux.ffi.Epoll;
import io.github.sockmap4j.linux.ffi.EpollEvent;
import io.github.sockmap4j.linux.ffi.Errno;
import io.github.sockmap4j.linux.ffi.LibC;
import io.github.sockmap4j.linux.ffi.Linux;
import io.github.sockmap4j.linux.ffi.NativeIOException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.channels.CancelledKeyException;
import java.nio.channels.ClosedSelectorException;
import java.nio.channels.IllegalSelectorException;
import java.nio.channels.SelectableChannel;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.spi.AbstractSelectableChannel;
import java.nio.channels.spi.AbstractSelectionKey;
import java.nio.channels.spi.AbstractSelector;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A level-triggered epoll selector for sockmap4j channels, woken through an eventfd.
 * epoll_wait runs outside the selector's monitor, so registering and changing interest from
 * other threads never waits for a select to return.
 */
final class EpollSelector extends AbstractSelector {
    private static final int MAX_EVENTS = 256;

    private final int epfd;
    private final int wakeFd;
    private final Arena arena = Arena.ofShared();
    /** The eventfd increment a wakeup writes, made once: wakeups must not allocate. */
    private final MemorySegment wakeOne = arena.allocateFrom(ValueLayout.JAVA_LONG, 1L);
    private final MemorySegment events;
    private final MemorySegment wakeBuf;
    private final ReentrantLock selectLock = new ReentrantLock();
    private final Map<Integer, Key> byFd = new HashMap<>();
    private final Set<SelectionKey> keys = new HashSet<>();
    private final Set<SelectionKey> selected = new HashSet<>();
    private final Set<SelectionKey> publicKeys = Collections.unmodifiableSet(keys);
    private final Set<SelectionKey> publicSelected = new RemoveOnlySet(selected);
    private volatile boolean woken;
    /** Keys whose EPOLLOUT is left out while their channel waits for credit; under this lock. */
    private int keysHeldForCredit;

    EpollSelector(SockmapSelectorProvider provider) throws IOException {
        super(provider);
        epfd = Epoll.epollCreate();
        try {
            wakeFd = Epoll.eventfd();
        } catch (NativeIOException e) {
            LibC.close(epfd);
            throw e;
        }
        int r = Epoll.tryEpollCtl(epfd, Linux.EPOLL_CTL_ADD, wakeFd, Linux.EPOLLIN);
        if (r < 0) {
            LibC.close(wakeFd);
            LibC.close(epfd);
            throw Errno.error("epoll_ctl", r);
        }
        events = arena.allocate(EpollEvent.SIZE * MAX_EVENTS, 8);
        wakeBuf = arena.allocate(8, 8);
    }

    final class Key extends AbstractSelectionKey {
        private final AbstractSelectableChannel channel;
        private final Selectable selectable;
        private final int fd;
        private volatile int interest;
        private volatile int ready;
        private boolean inEpoll;
        /** OP_WRITE is wanted but the channel waits for credit: EPOLLOUT is left out meanwhile. */
        private boolean heldForCredit;

        Key(AbstractSelectableChannel channel, Selectable selectable) {
            this.channel = channel;
            this.selectable = selectable;
            this.fd = selectable.socket().intValue();
        }

        @Override
        public SelectableChannel channel() {
            return channel;
        }

        @Override
        public Selector selector() {
            return EpollSelector.this;
        }

        @Override
        public int interestOps() {
            if (!isValid()) {
                throw new CancelledKeyException();
            }
            return interest;
        }

        @Override
        public SelectionKey interestOps(int ops) {
            if (!isValid()) {
                throw new CancelledKeyException();
            }
            if ((ops & ~channel.validOps()) != 0) {
                throw new IllegalArgumentException("invalid interest ops: " + ops);
            }
            synchronized (this) {
                interest = ops;
                updateEpoll(this);
            }
            return this;
        }

        @Override
        public int readyOps() {
            if (!isValid()) {
                throw new CancelledKeyException();
            }
            return ready;
        }

        int translate(int ev) {
            return selectable.readyOps().applyAsInt(ev, interest);
        }

        void kill() {
            selectable.kill().run();
        }
    }

    private void updateEpoll(Key k) {
        int ev = 0;
        int ops = k.interest;
        if ((ops & (SelectionKey.OP_READ | SelectionKey.OP_ACCEPT)) != 0) {
            ev |= Linux.EPOLLIN | Linux.EPOLLRDHUP;
        }
        if ((ops & SelectionKey.OP_CONNECT) != 0
                || (ops & SelectionKey.OP_WRITE) != 0 && !k.heldForCredit) {
            ev |= Linux.EPOLLOUT;
        }
        int r;
        if (ev == 0) {
            // An fd in epoll reports EPOLLHUP whatever it asked for: leave it out instead.
            r = k.inEpoll ? Epoll.tryEpollCtl(epfd, Linux.EPOLL_CTL_DEL, k.fd, 0) : 0;
            k.inEpoll = false;
        } else {
            r = Epoll.tryEpollCtl(epfd, k.inEpoll ? Linux.EPOLL_CTL_MOD : Linux.EPOLL_CTL_ADD, k.fd, ev);
            k.inEpoll = r == 0;
        }
        if (r < 0 && -r != Errno.ENOENT && -r != Errno.EBADF) {
            throw new UncheckedIOException(Errno.error("epoll_ctl", r));
        }
    }

    @Override
    protected SelectionKey register(AbstractSelectableChannel ch, int ops, Object att) {
        Selectable selectable = ch instanceof SockmapChannel sc ? sc.selectable()
                : ch instanceof SockmapServerChannel ss ? ss.selectable() : null;
        if (selectable == null) {
            throw new IllegalSelectorException();
        }
        if (!isOpen()) {
            throw new ClosedSelectorException();
        }
        Key k = new Key(ch, selectable);
        k.attach(att);
        synchronized (this) {
            keys.add(k);
            byFd.put(k.fd, k);
        }
        k.interestOps(ops);
        return k;
    }

    @Override
    public Set<SelectionKey> keys() {
        ensureOpen();
        return publicKeys;
    }

    @Override
    public Set<SelectionKey> selectedKeys() {
        ensureOpen();
        return publicSelected;
    }

    private void ensureOpen() {
        if (!isOpen()) {
            throw new ClosedSelectorException();
        }
    }

    @Override
    public int selectNow() throws IOException {
        return doSelect(0);
    }

    @Override
    public int select(long timeout) throws IOException {
        if (timeout < 0) {
            throw new IllegalArgumentException("negative timeout: " + timeout);
        }
        return doSelect(timeout == 0 ? -1 : (int) Math.min(timeout, Integer.MAX_VALUE));
    }

    @Override
    public int select() throws IOException {
        return doSelect(-1);
    }

    /** How often keys held for credit are looked at while they wait (epoll has no event for it). */
    private static final int CREDIT_POLL_MILLIS = 1;

    private int doSelect(int timeoutMillis) throws IOException {
        ensureOpen();
        selectLock.lock();
        try {
            ensureOpen();
            long deadline = timeoutMillis <= 0 ? 0 : System.nanoTime() + timeoutMillis * 1_000_000L;
            while (true) {
                processCancelled();
                List<Key> held = holdForCredit();
                int timeout = woken ? 0 : timeoutMillis <= 0 ? timeoutMillis
                        : (int) Math.max(0, (deadline - System.nanoTime()) / 1_000_000L);
                if (!held.isEmpty() && (timeout < 0 || timeout > CREDIT_POLL_MILLIS)) {
                    timeout = CREDIT_POLL_MILLIS;
                }
                int n;
                try {
                    begin();
                    do {
                        n = Epoll.tryEpollWait(epfd, events, timeout);
                    } while (n == -Errno.EINTR && !Thread.currentThread().isInterrupted());
                } finally {
                    end();
                }
                if (n < 0 && n != -Errno.EINTR) {
                    throw Errno.error("epoll_wait", n);
                }
                boolean wakeup = woken;
                woken = false;
                processCancelled();
                int updated = collect(n);
                updated += releaseCredit(held);
                boolean timedOut = timeoutMillis == 0 || timeoutMillis > 0 && System.nanoTime() - deadline >= 0;
                if (updated > 0 || held.isEmpty() || wakeup || timedOut || Thread.currentThread().isInterrupted()) {
                    return updated;
                }
            }
        } finally {
            selectLock.unlock();
        }
    }

    private int collect(int n) {
        int updated = 0;
        synchronized (this) {
            for (int i = 0; i < n; i++) {
                int fd = EpollEvent.fd(events, i);
                if (fd == wakeFd) {
                    LibC.tryRead(wakeFd, wakeBuf);
                    continue;
                }
                Key k = byFd.get(fd);
                if (k == null || !k.isValid()) {
                    continue;
                }
                updated += markReady(k, k.translate(EpollEvent.events(events, i)));
            }
        }
        return updated;
    }

    private int markReady(Key k, int ready) {
        if (ready == 0) {
            return 0;
        }
        if (selected.add(k)) {
            k.ready = ready;
            return 1;
        }
        if ((k.ready | ready) != k.ready) {
            k.ready |= ready;
            return 1;
        }
        return 0;
    }

    /**
     * Keys that want OP_WRITE for a channel whose last non-blocking write stopped for credit:
     * EPOLLOUT (the socket has room) says nothing about credit, so it is left out until the
     * credit returns, and the select polls for it instead.
     */
    private List<Key> holdForCredit() {
        List<Key> held = List.of();
        synchronized (this) {
            if (keysHeldForCredit == 0 && !ChannelCredit.anyHeld()) {
                return held; // the usual case: one volatile read per select
            }
            for (SelectionKey sk : keys) {
                Key k = (Key) sk;
                if (k.isValid() && (k.interest & SelectionKey.OP_WRITE) != 0
                        && k.selectable.creditHeld().getAsBoolean()) {
                    if (held.isEmpty()) {
                        held = new ArrayList<>();
                    }
                    held.add(k);
                    synchronized (k) {
                        if (!k.heldForCredit) {
                            k.heldForCredit = true;
                            keysHeldForCredit++;
                            updateEpoll(k);
                        }
                    }
                } else if (k.heldForCredit) {
                    // Its credit came back through a write, not through this selector.
                    unhold(k);
                }
            }
        }
        return held;
    }

    /** Puts EPOLLOUT back for a key that no longer waits for credit. Under this selector's lock. */
    private void unhold(Key k) {
        synchronized (k) {
            if (k.heldForCredit) {
                k.heldForCredit = false;
                keysHeldForCredit--;
                if (k.isValid()) {
                    updateEpoll(k);
                }
            }
        }
    }

    private int releaseCredit(List<Key> held) {
        int updated = 0;
        for (Key k : held) {
            if (k.isValid() && k.selectable.creditReturned().getAsBoolean()) {
                synchronized (this) {
                    unhold(k);
                    updated += markReady(k, k.interest & SelectionKey.OP_WRITE);
                }
            }
        }
        return updated;
    }

    private void processCancelled() {
        Set<SelectionKey> cancelled = cancelledKeys();
        synchronized (cancelled) {
            if (cancelled.isEmpty()) {
                return;
            }
            for (Iterator<SelectionKey> it = cancelled.iterator(); it.hasNext(); ) {
                Key k = (Key) it.next();
                it.remove();
                synchronized (this) {
                    if (k.heldForCredit) {
                        k.heldForCredit = false;
                        keysHeldForCredit--;
                    }
                    if (k.inEpoll) {
                        Epoll.tryEpollCtl(epfd, Linux.EPOLL_CTL_DEL, k.fd, 0);
                        k.inEpoll = false;
                    }
                    keys.remove(k);
                    selected.remove(k);
                    if (byFd.get(k.fd) == k) {
                        byFd.remove(k.fd);
                    }
                }
                deregister(k);
                k.kill();
            }
        }
    }

    @Override
    public Selector wakeup() {
        if (!woken) {
            woken = true;
            try {
                LibC.tryWrite(wakeFd, wakeOne);
            } catch (IllegalStateException closed) {
                // The selector is closed and its memory freed: nobody waits to be woken.
            }
        }
        return this;
    }

    @Override
    protected void implCloseSelector() throws IOException {
        wakeup();
        selectLock.lock();
        try {
            Set<SelectionKey> all;
            synchronized (this) {
                all = new HashSet<>(keys);
            }
            for (SelectionKey k : all) {
                k.cancel();
            }
            processCancelled();
            LibC.close(wakeFd);
            LibC.close(epfd);
            arena.close();
        } finally {
            selectLock.unlock();
        }
    }
}
