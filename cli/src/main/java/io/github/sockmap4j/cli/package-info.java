/**
 * The {@code sockmap4j} command for operators: set up, inspect and remove a pin directory, run
 * the node agent, change policy, attach the XDP filter.
 */
package io.github.sockmap4j.cli;
