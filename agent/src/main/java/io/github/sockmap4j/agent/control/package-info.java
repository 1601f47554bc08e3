/**
 * The agent's control socket: its server, the policy file of who may opt in what, and the books of
 * who holds each rule and who put each Service (journals under the lock directory).
 */
package io.github.sockmap4j.agent.control;
