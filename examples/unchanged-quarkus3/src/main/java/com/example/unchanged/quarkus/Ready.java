package com.example.unchanged.quarkus;

import io.quarkus.runtime.StartupEvent;
import jakarta.enterprise.event.Observes;

/** Prints "ready=1" once the application has started (its HTTP server listens by then). */
public class Ready {
    void onStart(@Observes StartupEvent e) {
        System.out.println("ready=1");
        System.out.flush();
    }
}
