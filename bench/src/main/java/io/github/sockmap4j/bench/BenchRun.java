package io.github.sockmap4j.bench;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * What the benchmark mains share: their positional arguments (with defaults, and a message naming
 * the argument when one is not a number), the header line that says what ran where, per-round
 * figures by case and metric with their medians, and aligned tables with ratios to the plain path
 * measured in the same run. Every figure a benchmark prints is a median over its rounds.
 */
final class BenchRun {
    private final String usage;
    private final String[] args;

    private BenchRun(String usage, String[] args) {
        this.usage = usage;
        this.args = args;
    }

    /**
     * @param usage the main's usage line, shown when an argument is wrong
     * @param args  its arguments
     */
    static BenchRun of(String usage, String[] args) {
        return new BenchRun(usage, args);
    }

    int intArg(int i, int otherwise) {
        return (int) longArg(i, otherwise);
    }

    long longArg(int i, long otherwise) {
        if (args.length <= i) {
            return otherwise;
        }
        try {
            return Long.parseLong(args[i]);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("argument " + (i + 1) + " is not a number: '" + args[i] + "'; usage: "
                    + usage, e);
        }
    }

    /** A comma-separated list of numbers ("64,4096"). */
    int[] intsArg(int i, int... otherwise) {
        if (args.length <= i) {
            return otherwise;
        }
        try {
            return Arrays.stream(args[i].split(",")).mapToInt(Integer::parseInt).toArray();
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("argument " + (i + 1) + " is not a list of numbers: '" + args[i]
                    + "'; usage: " + usage, e);
        }
    }

    String arg(int i, String otherwise) {
        return args.length > i ? args[i] : otherwise;
    }

    /** "2 CPUs, kernel 6.1.0, 25.0.3+9-LTS": where a run ran. */
    static String machine() {
        return String.format(Locale.ROOT, "%d CPUs, kernel %s, %s", Runtime.getRuntime().availableProcessors(),
                System.getProperty("os.version"), Runtime.version());
    }

    /** Prints the run's header: what it measures, how, and {@link #machine()}. */
    static void header(String what) {
        System.out.println(what + ", " + machine());
    }

    /**
     * Figures per round, by case and metric: {@code put} one a round, {@code median} over the
     * rounds measured (a case skipped in a round counts no figure there).
     */
    static final class Rounds<K> {
        private final Map<K, Map<String, List<Double>>> figures = new LinkedHashMap<>();

        void put(K kase, String metric, double value) {
            figures.computeIfAbsent(kase, k -> new HashMap<>()).computeIfAbsent(metric, m -> new ArrayList<>())
                    .add(value);
        }

        boolean has(K kase) {
            return figures.containsKey(kase);
        }

        boolean has(K kase, String metric) {
            return figures.containsKey(kase) && figures.get(kase).containsKey(metric);
        }

        /** "min–max" of the rounds' figures, one decimal: the spread a median hides. */
        String range(K kase, String metric) {
            List<Double> v = figures.getOrDefault(kase, Map.of()).get(metric);
            if (v == null || v.isEmpty()) {
                throw new IllegalStateException("no " + metric + " measured for " + kase);
            }
            return fmt(v.stream().mapToDouble(Double::doubleValue).min().orElseThrow()) + "-"
                    + fmt(v.stream().mapToDouble(Double::doubleValue).max().orElseThrow());
        }

        double median(K kase, String metric) {
            List<Double> v = figures.getOrDefault(kase, Map.of()).get(metric);
            if (v == null || v.isEmpty()) {
                throw new IllegalStateException("no " + metric + " measured for " + kase);
            }
            return Medians.of(v.stream().mapToDouble(Double::doubleValue).toArray());
        }
    }

    /** A table printed with its columns aligned: the first {@code left} columns left, the others right. */
    static final class Table {
        private final List<String[]> rows = new ArrayList<>();
        private final int left;

        Table(int left, String... header) {
            this.left = left;
            rows.add(header);
        }

        Table row(Object... cells) {
            rows.add(Arrays.stream(cells).map(String::valueOf).toArray(String[]::new));
            return this;
        }

        void print() {
            int cols = rows.stream().mapToInt(r -> r.length).max().orElse(0);
            int[] width = new int[cols];
            for (String[] r : rows) {
                for (int c = 0; c < r.length; c++) {
                    width[c] = Math.max(width[c], r[c].length());
                }
            }
            for (String[] r : rows) {
                StringBuilder line = new StringBuilder();
                for (int c = 0; c < r.length; c++) {
                    String cell = r[c];
                    String pad = " ".repeat(width[c] - cell.length());
                    line.append(c == 0 ? "" : "  ").append(c < left ? cell + pad : pad + cell);
                }
                System.out.println(line.toString().stripTrailing());
            }
        }
    }

    /** A figure with one decimal. */
    static String fmt(double v) {
        return String.format(Locale.ROOT, "%.1f", v);
    }

    /** {@code value / base} with two decimals: below 1 is faster (or less) than the base. */
    static String ratio(double value, double base) {
        return String.format(Locale.ROOT, "%.2f", value / base);
    }
}
