/**
 * For measuring: the benchmarks the scripts under scripts/bench-*.sh run, each printing the plain
 * path and the fast path of one run side by side.
 */
package io.github.sockmap4j.bench;
