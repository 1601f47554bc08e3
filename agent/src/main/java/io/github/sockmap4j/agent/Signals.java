package io.github.sockmap4j.agent;

import java.lang.reflect.Proxy;

/**
 * SIGTERM and SIGINT end the agent's wait, so that it closes what it opened and exits 0 (a
 * shutdown hook alone would exit 143). The JDK's signal API ({@code sun.misc.Signal}, module
 * jdk.unsupported) is reached by reflection, since javac cannot be told to accept it quietly. A
 * signal the JVM cannot take (SIGINT of a process started with it ignored, as background jobs
 * are) is left alone; the caller's shutdown hook covers whatever ends the JVM otherwise.
 */
final class Signals {
    private Signals() {
    }

    static void onTermination(Runnable action) {
        try {
            Class<?> signal = Class.forName("sun.misc.Signal");
            Class<?> handler = Class.forName("sun.misc.SignalHandler");
            Object h = Proxy.newProxyInstance(Signals.class.getClassLoader(), new Class<?>[] {handler},
                    (proxy, method, args) -> switch (method.getName()) {
                        case "handle" -> {
                            action.run();
                            yield null;
                        }
                        case "hashCode" -> System.identityHashCode(proxy);
                        case "equals" -> proxy == args[0];
                        default -> "sockmap4j agent stop";
                    });
            for (String name : new String[] {"TERM", "INT"}) {
                try {
                    Object sig = signal.getConstructor(String.class).newInstance(name);
                    signal.getMethod("handle", signal, handler).invoke(null, sig, h);
                } catch (ReflectiveOperationException | RuntimeException e) {
                    // This one stays with the JVM (and so with the shutdown hook).
                }
            }
        } catch (ReflectiveOperationException | LinkageError | RuntimeException e) {
            // No signal API: the shutdown hook does the work.
        }
    }
}
