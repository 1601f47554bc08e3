/**
 * For the docs: the plots of recorded benchmark runs.
 */
package io.github.sockmap4j.plots;
