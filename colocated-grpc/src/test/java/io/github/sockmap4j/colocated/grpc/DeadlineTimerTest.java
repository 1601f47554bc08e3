package io.github.sockmap4j.colocated.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.internal.SharedResourceHolder;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class DeadlineTimerTest {
    private ScheduledExecutorService timer;

    @BeforeEach
    void get() {
        timer = SharedResourceHolder.get(DeadlineTimer.RESOURCE);
    }

    @AfterEach
    void release() {
        SharedResourceHolder.release(DeadlineTimer.RESOURCE, timer);
    }

    private int queued() {
        return ((ScheduledThreadPoolExecutor) timer).getQueue().size();
    }

    @Test
    void deadlinesFireInTheirOrder() throws InterruptedException {
        List<Integer> fired = new CopyOnWriteArrayList<>();
        CountDownLatch all = new CountDownLatch(3);
        for (int i : new int[] {3, 1, 2}) {
            timer.schedule(() -> {
                fired.add(i);
                all.countDown();
            }, 20L * i, TimeUnit.MILLISECONDS);
        }
        assertTrue(all.await(10, TimeUnit.SECONDS), "every deadline fired");
        assertEquals(List.of(1, 2, 3), fired);
    }

    @Test
    void cancelledDeadlinesLeaveTheQueueButItsHead() throws InterruptedException {
        int before = queued();
        List<ScheduledFuture<?>> tasks = new ArrayList<>();
        for (int i = 0; i < 1000; i++) {
            tasks.add(timer.schedule(() -> { }, 60_000 + i, TimeUnit.MILLISECONDS)); // as calls' deadlines
        }
        assertEquals(before + 1000, queued());
        tasks.forEach(t -> assertTrue(t.cancel(false)));
        assertTrue(queued() <= before + 1, "at most the head stays queued: " + queued());
        assertTrue(tasks.stream().allMatch(ScheduledFuture::isCancelled));
        // a cancelled head never runs, and what is scheduled after it still fires
        CountDownLatch ran = new CountDownLatch(1);
        ScheduledFuture<?> head = timer.schedule(() -> { }, 30, TimeUnit.MILLISECONDS);
        timer.schedule(ran::countDown, 60, TimeUnit.MILLISECONDS);
        assertTrue(head.cancel(false));
        assertTrue(ran.await(10, TimeUnit.SECONDS), "the later deadline fired");
        assertFalse(head.isDone() && !head.isCancelled());
    }
}
