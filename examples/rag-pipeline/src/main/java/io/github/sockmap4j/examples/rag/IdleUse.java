package io.github.sockmap4j.examples.rag;

import java.util.EnumMap;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

/**
 * What a pipeline's stages used with no traffic: % of a CPU by stage and by thread name (its
 * digits as N), from the scheduler's run time of each stage's threads over a quiet window.
 *
 * @param byStage  each stage's % of a CPU
 * @param byThread each "stage/thread name" that used any, its % of a CPU
 */
record IdleUse(Map<RagService.Role, Double> byStage, Map<String, Double> byThread) {
    /**
     * Sends nothing for {@code seconds} (the window is the point: a stage's idle cost is what its
     * threads do when no request comes) and reads what each pipeline's stages used meanwhile;
     * empty figures for each where {@code seconds} is 0 or the stages share this JVM.
     */
    static Map<Pipeline, IdleUse> measure(List<Pipeline> pipelines, double seconds, boolean inProcess)
            throws InterruptedException {
        Map<Pipeline, IdleUse> out = new HashMap<>();
        if (seconds <= 0 || inProcess) {
            pipelines.forEach(p -> out.put(p, new IdleUse(new EnumMap<>(RagService.Role.class), new TreeMap<>())));
            return out;
        }
        Map<Pipeline, Map<RagService.Role, ThreadTimes>> t0 = new HashMap<>();
        pipelines.forEach(p -> t0.put(p, StageMeters.threads(p.stages)));
        long w0 = System.nanoTime();
        Thread.sleep((long) (seconds * 1000));
        double wall = (System.nanoTime() - w0) / 1e9;
        for (Pipeline p : pipelines) {
            Map<String, Long> use = StageMeters.cpuByName(StageMeters.since(t0.get(p), StageMeters.threads(p.stages)));
            Map<RagService.Role, Double> byStage = new EnumMap<>(RagService.Role.class);
            Map<String, Double> byThread = new TreeMap<>();
            for (RagService.Role role : RagService.Role.values()) {
                byStage.put(role, 0.0);
            }
            use.forEach((name, d) -> {
                if (d > 0) {
                    double pct = 100.0 * d / (wall * 1e9);
                    byThread.put(name, pct);
                    byStage.merge(RagService.Role.valueOf(name.substring(0, name.indexOf('/')).toUpperCase(Locale.ROOT)),
                            pct, Double::sum);
                }
            });
            out.put(p, new IdleUse(byStage, byThread));
        }
        return out;
    }
}
