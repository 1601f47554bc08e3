package io.github.sockmap4j.agent;

import java.nio.file.Path;

/** A command that says which pin directory its subcommands act on ({@code --pin-dir}). */
public interface PinDirectory {
    /** The bpffs directory of the pins. */
    Path pinDirectory();
}
