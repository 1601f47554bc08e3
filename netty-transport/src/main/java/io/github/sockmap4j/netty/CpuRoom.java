package io.github.sockmap4j.netty;

import io.github.sockmap4j.linux.sys.CpuPressure;
import java.io.IOException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Whether the CPUs have room for polling: the one gate every polling loop and executor thread of
 * this JVM asks before it polls. A poll holds a CPU that another task may be waiting for; where
 * tasks wait, a wake-up saved is paid for by someone else's delay (and in a container with a CPU
 * limit, by its quota). So polling stops while some task has been waiting for a CPU more than
 * {@value #BUSY_PERCENT}% of the last period ({@link CpuPressure}: this process's cgroup, else the
 * host, else an estimate) and starts again once that share is below {@value #ROOMY_PERCENT}%.
 *
 * <p>The shares are high because the waits count the pollers' own and every hand-off's: measured
 * on 2 vCPUs (docs/lab-notes.md, "Polling that stops for busy CPUs"), a gRPC unary ping-pong with
 * sleeping loops had some task waiting 25% of the time, the same with polling loops and executor
 * 58–64% (at a quarter of the latency), the RAG demo 10–12%, and threads spinning on every CPU
 * close to 100%. The gate tells a saturated machine from one with room; it cannot tell where
 * polling pays, which {@link PollWindow} learns per loop.
 *
 * <p>The pressure is read at most once a period ({@value #PERIOD_MILLIS} ms), by whichever poller
 * asks first after it ends; the others read a volatile field. Where no pressure reads at all, the
 * gate stays open: polling then learns only from its own sleeps ({@link PollWindow}).
 *
 * <p><b>Note:</b> this class is threadsafe.
 */
final class CpuRoom {
    private static final Logger LOG = LoggerFactory.getLogger(CpuRoom.class);
    static final int BUSY_PERCENT = 80;
    static final int ROOMY_PERCENT = 60;
    static final long PERIOD_MILLIS = 50;

    /**
     * The system property that keeps the gate open: for a service whose CPUs are its own (pinned,
     * or a node with nothing else on it), where the waits polling makes are only its own.
     */
    static final String POLL_WHILE_BUSY = "sockmap4j.pollWhileBusy";
    private static volatile CpuRoom shared;
    /** A gate that reads no pressure and never closes: polling as before this gate (tests of polling itself). */
    static final CpuRoom ALWAYS = new CpuRoom(null, PERIOD_MILLIS * 1_000_000);

    /** The decision from the readings: pure, fed by {@link #refresh} or a test. */
    static final class Rule {
        private long lastWallNanos = Long.MIN_VALUE;
        private long lastStalledMicros;
        private boolean room = true;

        /**
         * A reading at {@code wallNanos} of {@code stalledMicros} waited so far: returns whether
         * polling may go on. The first reading only sets the base.
         */
        boolean update(long wallNanos, long stalledMicros) {
            if (lastWallNanos != Long.MIN_VALUE && wallNanos > lastWallNanos) {
                long waited = Math.max(0, stalledMicros - lastStalledMicros) * 1000;
                long wall = wallNanos - lastWallNanos;
                if (room && waited * 100 > wall * BUSY_PERCENT) {
                    room = false;
                } else if (!room && waited * 100 < wall * ROOMY_PERCENT) {
                    room = true;
                }
            }
            lastWallNanos = wallNanos;
            lastStalledMicros = stalledMicros;
            return room;
        }

        boolean room() {
            return room;
        }
    }

    private final CpuPressure pressure;
    private final Rule rule = new Rule();
    private final ReentrantLock reading = new ReentrantLock();
    private final AtomicLong nextReadNanos = new AtomicLong(System.nanoTime());
    private final long periodNanos;
    private volatile boolean room = true;

    CpuRoom(CpuPressure pressure, long periodNanos) {
        this.pressure = pressure;
        this.periodNanos = periodNanos;
    }

    /** The JVM's gate, opened at the first poll. */
    static CpuRoom shared() {
        CpuRoom r = shared;
        if (r == null) {
            synchronized (CpuRoom.class) {
                r = shared;
                if (r == null && Boolean.getBoolean(POLL_WHILE_BUSY)) {
                    LOG.info("{}=true: polling goes on while tasks wait for a CPU", POLL_WHILE_BUSY);
                    shared = r = ALWAYS;
                } else if (r == null) {
                    CpuPressure p = null;
                    try {
                        p = CpuPressure.open();
                        LOG.debug("polling stops while tasks wait for a CPU more than {}% of the time, by {}",
                                BUSY_PERCENT, p);
                    } catch (IOException | RuntimeException e) {
                        LOG.info("no CPU pressure reads here ({}): polling does not stop for busy CPUs", e.toString());
                    }
                    shared = r = new CpuRoom(p, PERIOD_MILLIS * 1_000_000);
                }
            }
        }
        return r;
    }

    /** Whether a poller may poll now; reads the pressure when a period has ended. */
    boolean hasRoom() {
        long now = System.nanoTime();
        long next = nextReadNanos.get();
        if (now - next >= 0 && pressure != null && nextReadNanos.compareAndSet(next, now + periodNanos)) {
            refresh(now);
        }
        return room;
    }

    private void refresh(long now) {
        if (!reading.tryLock()) {
            return;
        }
        try {
            room = rule.update(now, pressure.stalledMicros());
        } catch (IOException | RuntimeException e) {
            room = true;
            LOG.debug("CPU pressure did not read: {}", e.toString());
        } finally {
            reading.unlock();
        }
    }

    /** Where the pressure comes from, or null where none reads. */
    CpuPressure.Source source() {
        return pressure == null ? null : pressure.source();
    }
}
