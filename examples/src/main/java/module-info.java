/** Programs a user runs: the quick-start echo demo. */
module io.github.sockmap4j.examples {
    requires io.github.sockmap4j.core;
    requires io.github.sockmap4j.bench;

    exports io.github.sockmap4j.examples;
}
