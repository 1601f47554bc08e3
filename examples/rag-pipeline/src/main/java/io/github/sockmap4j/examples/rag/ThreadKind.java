package io.github.sockmap4j.examples.rag;

import java.util.Locale;
import java.util.regex.Pattern;

/**
 * What a stage's thread is for, read from its name as the kernel keeps it ({@code comm}: 15
 * characters at most): the groups the demo charges each request's CPU to, so that where the fast
 * path costs more than plain TCP shows by group.
 */
enum ThreadKind {
    /**
     * gRPC's executor (grpc-default-executor-N), sockmap4j's polling executor and its pool for
     * blocking services (sockmap4j-handler-N): the stage's handlers and callbacks when they do not
     * run on the event loops.
     */
    HANDLERS("handlers"),
    /** Netty's event loops: the demo's (rag-io-N-N) and sockmap4j's gRPC groups (sockmap4j-grpc-...). */
    EVENT_LOOPS("event loops"),
    /** sockmap4j's own threads: the in-flight watcher, namespace helpers, the exit hook. */
    SOCKMAP4J("sockmap4j's threads"),
    /** The JVM's JIT compilers. */
    JIT("JIT compilers"),
    /** Garbage collection and the VM thread (the serial collector runs on the VM thread). */
    GC_VM("GC and VM thread"),
    /** Everything else: main, the stage's I/O forwarding, finalizers, signal handling. */
    REST("the rest");

    private static final Pattern JIT_NAME = Pattern.compile("C[12] CompilerThre");
    private static final Pattern GC_VM_NAME = Pattern.compile("GC |G1 |VM Thread|VM Periodic");

    final String label;

    ThreadKind(String label) {
        this.label = label;
    }

    /**
     * The group of a thread whose {@code comm} is {@code name} (as /proc/PID/task/TID/stat
     * says it, before the demo replaces its digits).
     */
    static ThreadKind of(String name) {
        String n = name.toLowerCase(Locale.ROOT);
        if (n.startsWith("grpc-default-ex") || n.startsWith("sockmap4j-exec") || n.startsWith("sockmap4j-handl")) {
            return HANDLERS;
        }
        if (n.startsWith("rag-io-") || n.startsWith("sockmap4j-grpc") || n.startsWith("epolleventloop")
                || n.startsWith("multithreadioev")) {
            return EVENT_LOOPS;
        }
        if (n.startsWith("sockmap4j")) {
            return SOCKMAP4J;
        }
        if (JIT_NAME.matcher(name).lookingAt()) {
            return JIT;
        }
        if (GC_VM_NAME.matcher(name).lookingAt()) {
            return GC_VM;
        }
        return REST;
    }
}
