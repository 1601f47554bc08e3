package io.github.sockmap4j.cli;

import java.util.concurrent.Callable;
import picocli.CommandLine;

/**
 * What every subcommand is given by picocli: the command it runs under ({@code parent}: the
 * options every command inherits, such as {@code --pin-dir}) and its own spec (its output and
 * error streams, its usage errors).
 *
 * @param <P> the command it runs under
 */
abstract class Sub<P> implements Callable<Integer> {
    @CommandLine.ParentCommand
    P parent;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;
}
