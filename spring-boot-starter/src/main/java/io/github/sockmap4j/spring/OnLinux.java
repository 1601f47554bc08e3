package io.github.sockmap4j.spring;

import java.util.Locale;
import org.springframework.context.annotation.Condition;
import org.springframework.context.annotation.ConditionContext;
import org.springframework.core.type.AnnotatedTypeMetadata;

/** Matches on Linux, the only system with the fast path: elsewhere the starter sets nothing up. */
final class OnLinux implements Condition {
    @Override
    public boolean matches(ConditionContext context, AnnotatedTypeMetadata metadata) {
        return System.getProperty("os.name", "").toLowerCase(Locale.ROOT).startsWith("linux");
    }
}
