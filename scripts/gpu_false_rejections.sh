#!/usr/bin/env bash
# Issue #28's false-rejection benchmark (scripts/bench_false_rejections.py) on every visible GPU of
# one host at once, in one device call: each GPU judges its own share of the honest cases, alone on
# its device (CUDA_VISIBLE_DEVICES), in its own process with its own caches and results file.
#
#     OUT=gpu-out scripts/gpu_false_rejections.sh
#
# Two pieces, one after the other, each stopped by --max-minutes before an evaluation that would
# not fit (the results files make a rerun resume where it stopped):
#   idle    no load beside the run. The first GPU judges relu's fast form SPREAD times (default 20)
#           at the small and the default size (the interval-coverage check of #28), then the
#           CUDA-graph test (GRAPH_TEST=0 skips it), then its share; every GPU's share of the other honest cases (round
#           robin) is judged REPEATS times at SIZE (default: the default size).
#   stress  the same shares, STRESS_REPEATS times, with STRESS CPU busy-loop processes per GPU
#           process beside it (started and stopped by the benchmark itself).
# Every GPU process of a piece runs at the same time, so "idle" means: nothing else on that GPU,
# the host's other GPUs busy with their own shares.
# Results: each GPU's results file and log, the CUDA-graph test's log and the tables
# (report-idle.txt, report-stress.txt) in $OUT/false-rejections.tgz (one file: a device call
# brings back only a few), the tables also printed.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
RES=${RES:-.gpuwork/false-rejections}
SIZE=${SIZE:-default}
REPEATS=${REPEATS:-6}
STRESS_REPEATS=${STRESS_REPEATS:-4}
SPREAD=${SPREAD:-20}
STRESS=${STRESS:-14}
# Workers started ahead per GPU process: a warm evaluation on an H200 spent ~10 s starting its
# worker (interpreter, torch, CUDA, the baselines' torch.compile) against ~2 s judged; with 3 ahead
# the next repeats' workers start while one is judged (each timing still alone on its GPU).
SPARES=${SPARES:-3}
IDLE_MIN=${IDLE_MIN:-5.2}
STRESS_MIN=${STRESS_MIN:-3.2}
PIECES=${PIECES:-idle stress}
GRAPH_TEST=${GRAPH_TEST:-1}
LOGS=$RES/logs
mkdir -p "$OUT" "$LOGS"
bench=(python3 scripts/bench_false_rejections.py --device cuda)
n=$(nvidia-smi -L | wc -l)
mapfile -t all < <("${bench[@]}" --list | awk '{print $1}')
spread_case=relu/cuda_fast.py
others=()
for c in "${all[@]}"; do [ "$c" != "$spread_case" ] && others+=("$c"); done
echo "$n GPU(s); ${#others[@]} cases besides $spread_case; pieces: $PIECES"

share() {  # the cases of GPU $1 (comma-separated): round robin over every GPU
    local g=$1 i list=()
    for i in "${!others[@]}"; do
        [ $(( i % n )) -eq "$g" ] && list+=("${others[$i]}")
    done
    (IFS=,; echo "${list[*]}")
}

for piece in $PIECES; do
    minutes=$IDLE_MIN stress=0 repeats=$REPEATS
    [ "$piece" = stress ] && minutes=$STRESS_MIN stress=$STRESS repeats=$STRESS_REPEATS
    start=$(date +%s)
    pids=()
    for g in $(seq 0 $((n - 1))); do
        (
            export CUDA_VISIBLE_DEVICES=$g
            common=(--stress "$stress" --spares "$SPARES" --cache-dir "$RES/cache-gpu$g" --out "$RES/gpu$g-$piece.jsonl")
            left=$minutes
            if [ "$g" -eq 0 ] && [ "$piece" = idle ]; then
                "${bench[@]}" "${common[@]}" --only "$spread_case" --repeats "$SPREAD" --size small --size default \
                    --max-minutes "$minutes"
                if [ "$GRAPH_TEST" != 0 ]; then
                    timeout 150 python3 -m pytest -p no:benchmark -o addopts="" -rA -q -p no:cacheprovider \
                        tests/harness/test_graph_replay_gpu.py > "$LOGS/graph-replay.log" 2>&1
                    echo "gpu0 graph replay test: exit $? (log: graph-replay.log)"
                fi
                left=$(python3 -c "print(max(0.0, $minutes - ($(date +%s) - $start) / 60))")
            fi
            cases=$(share "$g")
            if [ -n "$cases" ] && python3 -c "import sys; sys.exit(0 if $left > 0.5 else 1)"; then
                "${bench[@]}" "${common[@]}" --only "$cases" --repeats "$repeats" --size "$SIZE" --max-minutes "$left"
            fi
        ) > "$LOGS/gpu$g-$piece.log" 2>&1 &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; done
    echo "piece $piece: $(( $(date +%s) - start )) s"
    cat "$RES"/gpu*-"$piece".jsonl > "$RES/all-$piece.jsonl" 2>/dev/null
    "${bench[@]}" --report "$RES/all-$piece.jsonl" > "$LOGS/report-$piece.txt" 2>&1
    tail -40 "$LOGS/report-$piece.txt"
done
grep -h "passed\|failed\|Error\|assert" "$LOGS/graph-replay.log" 2>/dev/null | tail -5
tar -czf "$OUT/false-rejections.tgz" -C "$RES" logs $(cd "$RES" && ls ./*.jsonl)
