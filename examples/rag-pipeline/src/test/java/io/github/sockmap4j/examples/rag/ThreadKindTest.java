package io.github.sockmap4j.examples.rag;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Map;
import org.junit.jupiter.api.Test;

/** The demo's thread kinds, read from names as the kernel cuts them (15 characters). */
class ThreadKindTest {
    @Test
    void eachStagesThreadsFallInTheirKind() {
        Map<String, ThreadKind> names = Map.ofEntries(
                Map.entry("grpc-default-ex", ThreadKind.HANDLERS),
                Map.entry("sockmap4j-exec-", ThreadKind.HANDLERS),
                Map.entry("rag-io-1-2", ThreadKind.EVENT_LOOPS),
                Map.entry("sockmap4j-grpc-", ThreadKind.EVENT_LOOPS),
                Map.entry("sockmap4j-watch", ThreadKind.SOCKMAP4J),
                Map.entry("sockmap4j-netns", ThreadKind.SOCKMAP4J),
                Map.entry("C2 CompilerThre", ThreadKind.JIT),
                Map.entry("C1 CompilerThre", ThreadKind.JIT),
                Map.entry("VM Thread", ThreadKind.GC_VM),
                Map.entry("GC Thread#0", ThreadKind.GC_VM),
                Map.entry("VM Periodic Tas", ThreadKind.GC_VM),
                Map.entry("main", ThreadKind.REST),
                Map.entry("Signal Dispatch", ThreadKind.REST),
                Map.entry("rag-SEARCH-err", ThreadKind.REST));
        names.forEach((name, kind) -> assertEquals(kind, ThreadKind.of(name), name));
    }

    @Test
    void eachKindCountsItsThreadsPerRequest() {
        ThreadTimes used = new ThreadTimes(Map.of(
                1L, new ThreadTimes.Sample("grpc-default-ex", 1, 3_000_000, 0),
                2L, new ThreadTimes.Sample("grpc-default-ex", 1, 1_000_000, 0),
                3L, new ThreadTimes.Sample("C2 CompilerThre", 1, 2_000_000, 0)), true);
        var perRequest = StageMeters.microsPerRequest(Map.of(RagService.Role.SEARCH, used), 1000);
        assertEquals(4.0, perRequest.get(RagService.Role.SEARCH).get(ThreadKind.HANDLERS));
        assertEquals(2.0, perRequest.get(RagService.Role.SEARCH).get(ThreadKind.JIT));
        assertEquals(0.0, perRequest.get(RagService.Role.SEARCH).get(ThreadKind.REST));
    }
}
