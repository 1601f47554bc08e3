package io.github.sockmap4j.plots;

import java.awt.BasicStroke;
import java.awt.Color;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.text.FieldPosition;
import java.text.NumberFormat;
import java.text.ParsePosition;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.HistogramIterationValue;
import org.jfree.chart.ChartUtils;
import org.jfree.chart.JFreeChart;
import org.jfree.chart.axis.LogAxis;
import org.jfree.chart.axis.NumberAxis;
import org.jfree.chart.plot.XYPlot;
import org.jfree.chart.renderer.xy.XYLineAndShapeRenderer;
import org.jfree.data.xy.XYSeries;
import org.jfree.data.xy.XYSeriesCollection;

/**
 * Latency-by-percentile plots (PNG) from HdrHistograms, the way HdrHistogram's own plotter draws
 * them: the x axis is 1/(1-p) on a log scale, so 50%, 90%, 99%, 99.9% are evenly spaced and the
 * tail gets as much room as the median.
 */
public final class Plots {
    private Plots() {
    }

    private static final Color[] COLORS = {new Color(0x1f77b4), new Color(0xd62728), new Color(0x2ca02c),
        new Color(0x9467bd), new Color(0xff7f0e), new Color(0x7f7f7f)};
    /** Solid first, then dashes that stay apart at 2 px. */
    private static final float[][] DASHES = {null, {9f, 5f}, {2f, 4f}, {9f, 4f, 2f, 4f}, {16f, 6f}, {4f, 4f}};

    /**
     * Each series' colour and dash, by name: the series of one group ("plain TCP #1", "plain TCP
     * #2": the name before its last " #") share a colour and differ in dash, in the order they
     * come; each group its own colour, in the order groups first come, and past the palette the
     * next dash. So ten series, five rounds of two paths, read as two colours.
     *
     * @return for each name, {colour index, dash index}
     */
    static int[][] styles(List<String> names) {
        List<String> groups = new ArrayList<>();
        Map<String, Integer> inGroup = new LinkedHashMap<>();
        int[][] out = new int[names.size()][];
        for (int i = 0; i < names.size(); i++) {
            String n = names.get(i);
            String group = n.contains(" #") ? n.substring(0, n.lastIndexOf(" #")) : n;
            if (!groups.contains(group)) {
                groups.add(group);
            }
            int g = groups.indexOf(group);
            int k = inGroup.merge(group, 1, Integer::sum) - 1;
            out[i] = new int[] {g % COLORS.length, k + g / COLORS.length};
        }
        return out;
    }

    /**
     * Writes a plot of each series' latency by percentile up to 99.9%, styled by {@link #styles}. {@code unitNanos} is what
     * one histogram unit is in nanoseconds (1 for ns histograms, 1000 for µs); the y axis is µs,
     * or ms when {@code millis}.
     */
    public static void percentiles(Path file, String title, Map<String, Histogram> series, double unitNanos,
            boolean millis) throws IOException {
        System.setProperty("java.awt.headless", "true");
        XYSeriesCollection data = new XYSeriesCollection();
        double yScale = unitNanos / (millis ? 1e6 : 1e3);
        for (Map.Entry<String, Histogram> e : series.entrySet()) {
            XYSeries s = new XYSeries(e.getKey(), false, true);
            for (HistogramIterationValue v : e.getValue().percentiles(5)) {
                double p = v.getPercentileLevelIteratedTo() / 100.0;
                if (p > 0.999) {
                    break;
                }
                s.add(1 / (1 - p), v.getValueIteratedTo() * yScale);
            }
            s.add(1000.0, e.getValue().getValueAtPercentile(99.9) * yScale);
            data.addSeries(s);
        }
        LogAxis x = new LogAxis("percentile");
        x.setBase(10);
        x.setRange(1, 1000);
        x.setTickUnit(new org.jfree.chart.axis.NumberTickUnit(1.0)); // one tick per power of ten: 0%, 90%, 99%, 99.9%
        x.setMinorTickCount(1);
        x.setNumberFormatOverride(new PercentileFormat());
        NumberAxis y = new NumberAxis(millis ? "latency (ms)" : "latency (µs)");
        write(file, title, data, x, y, styles(List.copyOf(series.keySet())), false, null);
    }

    /**
     * The line chart both plots draw: each series in its {@code style} ({colour, dash}), shapes at
     * the points where asked, a white background with grey grid lines, 900 × 500.
     */
    private static void write(Path file, String title, XYSeriesCollection data, org.jfree.chart.axis.ValueAxis x,
            org.jfree.chart.axis.ValueAxis y, int[][] style, boolean shapes, Float titleSize) throws IOException {
        XYLineAndShapeRenderer r = new XYLineAndShapeRenderer(true, shapes);
        for (int i = 0; i < style.length; i++) {
            r.setSeriesPaint(i, COLORS[style[i][0]]);
            float[] dash = DASHES[style[i][1] % DASHES.length];
            r.setSeriesStroke(i, dash == null ? new BasicStroke(2f)
                    : new BasicStroke(2f, BasicStroke.CAP_BUTT, BasicStroke.JOIN_MITER, 10f, dash, 0f));
        }
        XYPlot plot = new XYPlot(data, x, y, r);
        plot.setBackgroundPaint(Color.WHITE);
        plot.setDomainGridlinePaint(Color.LIGHT_GRAY);
        plot.setRangeGridlinePaint(Color.LIGHT_GRAY);
        JFreeChart chart = new JFreeChart(title, JFreeChart.DEFAULT_TITLE_FONT, plot, true);
        chart.setBackgroundPaint(Color.WHITE);
        if (titleSize != null) {
            chart.getTitle().setFont(chart.getTitle().getFont().deriveFont(titleSize));
        }
        Files.createDirectories(file.toAbsolutePath().getParent());
        ChartUtils.saveChartAsPNG(file.toFile(), chart, 900, 500);
    }

    /**
     * Writes lines through points, one per entry of {@code series} (x, y pairs in x order), styled
     * by {@link #styles} with ", " also ending a group's name ("plain TCP, P99" and "plain TCP,
     * P50" share a colour and differ in dash). A NaN y is left out.
     *
     * @param file   the PNG to write
     * @param title  the chart's title
     * @param xAxis  what x is
     * @param yAxis  what y is
     * @param series name to its points, each {x, y}
     * @param logY   whether the y axis is logarithmic (for latencies that span decades)
     * @throws IOException if the file cannot be written
     */
    public static void lines(Path file, String title, String xAxis, String yAxis, Map<String, List<double[]>> series,
            boolean logY) throws IOException {
        System.setProperty("java.awt.headless", "true");
        XYSeriesCollection data = new XYSeriesCollection();
        List<String> groups = new ArrayList<>();
        for (Map.Entry<String, List<double[]>> e : series.entrySet()) {
            XYSeries s = new XYSeries(e.getKey(), false, true);
            for (double[] xy : e.getValue()) {
                if (!Double.isNaN(xy[1]) && (!logY || xy[1] > 0)) {
                    s.add(xy[0], xy[1]);
                }
            }
            data.addSeries(s);
            String n = e.getKey();
            groups.add(n.contains(", ") ? n.substring(0, n.indexOf(", ")) + " #" + n.substring(n.indexOf(", ") + 2) : n);
        }
        NumberAxis x = new NumberAxis(xAxis);
        x.setAutoRangeIncludesZero(true);
        NumberAxis y;
        if (logY) {
            org.jfree.chart.axis.LogarithmicAxis log = new org.jfree.chart.axis.LogarithmicAxis(yAxis);
            log.setStrictValuesFlag(false); // a value at or below 0 is left out above, never an error
            log.setExpTickLabelsFlag(false);
            log.setLog10TickLabelsFlag(false);
            y = log;
        } else {
            y = new NumberAxis(yAxis);
        }
        write(file, title, data, x, y, styles(groups), true, 14f);
    }

    /**
     * Writes horizontal bars, one per entry of {@code bars} (top first), each stacked from its
     * segments in their order (the first segment's name labels the first colour, and so on; the
     * same names in every bar). A NaN segment is drawn as 0.
     *
     * @param file  the PNG to write
     * @param title the chart's title
     * @param axis  what the values are (the value axis's label)
     * @param bars  bar name to its segments' names and values
     * @throws IOException if the file cannot be written
     */
    public static void stackedBars(Path file, String title, String axis, Map<String, Map<String, Double>> bars)
            throws IOException {
        System.setProperty("java.awt.headless", "true");
        org.jfree.data.category.DefaultCategoryDataset data = new org.jfree.data.category.DefaultCategoryDataset();
        for (Map.Entry<String, Map<String, Double>> bar : bars.entrySet()) {
            for (Map.Entry<String, Double> seg : bar.getValue().entrySet()) {
                double v = seg.getValue();
                data.addValue(Double.isNaN(v) ? 0 : v, seg.getKey(), bar.getKey());
            }
        }
        JFreeChart chart = org.jfree.chart.ChartFactory.createStackedBarChart(title, null, axis, data,
                org.jfree.chart.plot.PlotOrientation.HORIZONTAL, true, false, false);
        org.jfree.chart.plot.CategoryPlot plot = chart.getCategoryPlot();
        plot.setBackgroundPaint(Color.WHITE);
        plot.setRangeGridlinePaint(Color.LIGHT_GRAY);
        org.jfree.chart.renderer.category.StackedBarRenderer r =
                (org.jfree.chart.renderer.category.StackedBarRenderer) plot.getRenderer();
        r.setBarPainter(new org.jfree.chart.renderer.category.StandardBarPainter());
        r.setShadowVisible(false);
        r.setDefaultItemLabelGenerator(new org.jfree.chart.labels.StandardCategoryItemLabelGenerator("{2}",
                new java.text.DecimalFormat("0.00")));
        r.setDefaultItemLabelsVisible(true);
        Color[] colors = {new Color(0x1f77b4), new Color(0xaec7e8), new Color(0xd62728), new Color(0xff9896),
            new Color(0x2ca02c), new Color(0x98df8a), new Color(0x7f7f7f), new Color(0xc7c7c7)};
        for (int i = 0; i < data.getRowCount(); i++) {
            r.setSeriesPaint(i, colors[i % colors.length]);
        }
        chart.setBackgroundPaint(Color.WHITE);
        chart.getTitle().setFont(chart.getTitle().getFont().deriveFont(14f));
        Files.createDirectories(file.toAbsolutePath().getParent());
        ChartUtils.saveChartAsPNG(file.toFile(), chart, 1000, 360);
    }

    /** A map that keeps the order series were added in. */
    public static Map<String, Histogram> series() {
        return new LinkedHashMap<>();
    }

    /** Labels 1/(1-p) ticks as percentiles: 10 → 90%, 100 → 99%. */
    private static final class PercentileFormat extends NumberFormat {
        private static final long serialVersionUID = 1L;

        @Override
        public StringBuffer format(double v, StringBuffer to, FieldPosition pos) {
            double p = 100 * (1 - 1 / v);
            return to.append(p == Math.rint(p) ? String.format(Locale.ROOT, "%.0f%%", p)
                    : String.format(Locale.ROOT, "%s%%", Double.toString(Math.round(p * 1000) / 1000.0)));
        }

        @Override
        public StringBuffer format(long v, StringBuffer to, FieldPosition pos) {
            return format((double) v, to, pos);
        }

        @Override
        public Number parse(String source, ParsePosition pos) {
            throw new UnsupportedOperationException();
        }
    }
}
