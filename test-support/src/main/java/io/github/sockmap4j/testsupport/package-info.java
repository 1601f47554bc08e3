/**
 * For this project's tests: JUnit extensions that check every test class leaves no socket
 * registered and close the shared fast path once.
 */
package io.github.sockmap4j.testsupport;
