package io.github.sockmap4j.spring;

import io.github.sockmap4j.OptIn;
import io.github.sockmap4j.Sockmap;
import io.github.sockmap4j.SockmapUnavailableException;
import java.io.IOException;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.DisposableBean;
import org.springframework.boot.web.server.context.WebServerInitializedEvent;
import org.springframework.context.ApplicationListener;

/**
 * Opts in the port of a web server that is not on the Netty transport (Tomcat, Jetty: Spring
 * MVC on blocking JDK sockets) once it listens, until the context closes. Their connections are
 * redirected by the kernel like any other on an opted-in port; their writers do not wait for
 * their receiver's credit (the transport's handlers are Netty's), so a write larger than the
 * receiver's in-flight bound goes on by TCP for the rest of that exchange. A Netty server of
 * the transport opts its port in itself, as part of its bind.
 */
class SockmapWebServerPorts implements ApplicationListener<WebServerInitializedEvent>, DisposableBean {
    private static final Logger LOG = LoggerFactory.getLogger(SockmapWebServerPorts.class);
    private final Sockmap sockmap;
    private final List<OptIn> optIns = new CopyOnWriteArrayList<>();

    SockmapWebServerPorts(Sockmap sockmap) {
        this.sockmap = sockmap;
    }

    @Override
    public void onApplicationEvent(WebServerInitializedEvent event) {
        String server = event.getWebServer().getClass().getSimpleName();
        int port = event.getWebServer().getPort();
        if (server.equals("NettyWebServer") || port <= 0) {
            return;
        }
        try {
            OptIn optIn = sockmap.optIn(port);
            optIns.add(optIn);
            if (optIn.active()) {
                LOG.info("Port {} of {} opted in to the sockmap fast path (not the transport's sockets: "
                        + "redirected, without credit)", port, server);
            } else {
                LOG.info("Port {} of {} serves over plain TCP: the sockmap fast path is off ({})", port, server,
                        sockmap.unavailabilityCause());
            }
        } catch (IOException | RuntimeException e) {
            if (sockmap.config().required()) {
                throw new SockmapUnavailableException("port " + port + " of " + server + " could not be opted in: "
                        + e.getMessage(), e);
            }
            LOG.warn("Port {} of {} serves over plain TCP: {}", port, server, e.getMessage());
        }
    }

    @Override
    public void destroy() {
        optIns.forEach(OptIn::close);
        optIns.clear();
    }
}
