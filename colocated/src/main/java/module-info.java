/**
 * Memory that the two ends of a co-located connection share ({@code SharedRegion}): a sealed
 * anonymous file with one message ring each way ({@code MessageRing}), read only after each
 * record is checked against the mapping, and a futex that wakes a sleeping reader once.
 */
module io.github.sockmap4j.colocated {
    requires io.github.sockmap4j.linux;

    exports io.github.sockmap4j.colocated;
}
