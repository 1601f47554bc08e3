package io.github.sockmap4j.colocated.grpc;

import io.grpc.internal.SharedResourceHolder;
import java.util.concurrent.Callable;
import java.util.concurrent.Delayed;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.RunnableScheduledFuture;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * The timer of the co-located transports' deadlines, which wakes its thread about once a deadline's
 * length while calls come and go, not once a call.
 *
 * <p>gRPC's shared timer removes a deadline's task when its call ends, so with one call at a time
 * its queue is empty whenever the next call schedules, the new task is the queue's head, and its
 * thread is woken to wait for it: a wake-up a call (measured in the demo's stages: one
 * {@code grpc-timer} wake-up a request, about as many as all the stage's other threads had). Over
 * HTTP/2 gRPC schedules on the connection's event loop, which is awake anyway. Here a cancelled
 * task is removed unless it is the queue's head: the head stays until its time, so a later call's
 * task (a later deadline) is not the head and wakes nobody, and what the queue holds stays the
 * live tasks and one more.
 */
final class DeadlineTimer extends ScheduledThreadPoolExecutor {
    /** One per process while a co-located transport holds it ({@link SharedResourceHolder}). */
    static final SharedResourceHolder.Resource<ScheduledExecutorService> RESOURCE = new SharedResourceHolder.Resource<>() {
        @Override
        public ScheduledExecutorService create() {
            return new DeadlineTimer();
        }

        @Override
        public void close(ScheduledExecutorService instance) {
            instance.shutdown();
        }

        @Override
        public String toString() {
            return "sockmap4j-deadlines";
        }
    };

    private DeadlineTimer() {
        super(1, r -> Thread.ofPlatform().daemon().name("sockmap4j-deadlines").unstarted(r));
        setRemoveOnCancelPolicy(false); // this class removes what it may
    }

    @Override
    protected <V> RunnableScheduledFuture<V> decorateTask(Runnable r, RunnableScheduledFuture<V> task) {
        return new Task<>(task);
    }

    @Override
    protected <V> RunnableScheduledFuture<V> decorateTask(Callable<V> c, RunnableScheduledFuture<V> task) {
        return new Task<>(task);
    }

    /** A task whose cancel takes it out of the queue, unless it is the queue's head. */
    private final class Task<V> implements RunnableScheduledFuture<V> {
        private final RunnableScheduledFuture<V> task;

        Task(RunnableScheduledFuture<V> task) {
            this.task = task;
        }

        @Override
        public boolean cancel(boolean mayInterruptIfRunning) {
            boolean cancelled = task.cancel(mayInterruptIfRunning);
            if (cancelled && getQueue().peek() != this) {
                remove(this); // the head stays: the thread waits for it already, and a new head would wake it
            }
            return cancelled;
        }

        @Override
        public boolean isPeriodic() {
            return task.isPeriodic();
        }

        @Override
        public void run() {
            task.run();
        }

        @Override
        public long getDelay(TimeUnit unit) {
            return task.getDelay(unit);
        }

        @Override
        public int compareTo(Delayed o) {
            return task.compareTo(o instanceof Task<?> t ? t.task : o);
        }

        @Override
        public boolean isCancelled() {
            return task.isCancelled();
        }

        @Override
        public boolean isDone() {
            return task.isDone();
        }

        @Override
        public V get() throws InterruptedException, ExecutionException {
            return task.get();
        }

        @Override
        public V get(long timeout, TimeUnit unit) throws InterruptedException, ExecutionException, TimeoutException {
            return task.get(timeout, unit);
        }
    }
}
