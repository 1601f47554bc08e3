package io.github.sockmap4j.spring.mvc;

import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RestController;

/** A Spring MVC service on Tomcat (blocking JDK sockets), with nothing of sockmap4j in it. */
@SpringBootApplication
@RestController
public class MvcApplication {
    @PostMapping("/echo")
    public byte[] echo(@RequestBody byte[] body) {
        return body;
    }
}
