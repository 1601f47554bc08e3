package io.github.sockmap4j.spring;

import io.github.sockmap4j.SockmapUnavailableException;
import org.springframework.boot.diagnostics.AbstractFailureAnalyzer;
import org.springframework.boot.diagnostics.FailureAnalysis;

/**
 * Turns a start that failed for want of the fast path ({@code sockmap4j.require=true}) into
 * Spring Boot's report of what happened and what to do, instead of a stack trace.
 */
class SockmapFailureAnalyzer extends AbstractFailureAnalyzer<SockmapUnavailableException> {
    @Override
    protected FailureAnalysis analyze(Throwable rootFailure, SockmapUnavailableException cause) {
        return new FailureAnalysis("The sockmap fast path is required (sockmap4j.require=true): " + cause.getMessage(),
                "Run the service where the fast path works: Linux 6.1 or newer with BPF, cgroup v2 and bpffs "
                        + "(/sys/fs/bpf), and either CAP_BPF (or CAP_SYS_ADMIN) and CAP_NET_ADMIN, or a sockmap4j node agent "
                        + "serving the pin directory (sockmap4j.pin-dir). To start on plain TCP instead, set "
                        + "sockmap4j.require=false; to leave sockmap4j out entirely, sockmap4j.enabled=false.",
                cause);
    }
}
