"""The evaluation harness: build, fuzz, reject reward hacks, time; the Nsight Compute profiler; static analysis."""
