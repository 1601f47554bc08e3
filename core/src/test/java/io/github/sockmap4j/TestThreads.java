package io.github.sockmap4j;

import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * Platform threads for the tests' blocking peers. The common pool has one thread on these
 * 2-vCPU machines: a blocked writer there starves the reader that would unblock it.
 */
final class TestThreads {
    static final ExecutorService POOL = Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "test-peer");
        t.setDaemon(true);
        return t;
    });

    private TestThreads() {
    }
}
