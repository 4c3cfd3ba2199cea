// Preloaded into each service when BENCH_SERVICE_LOGS is set: the process's time origin (epoch ms),
// so gc-episodes.mjs can place the times --trace-gc prints (ms since the process started) on the
// bench trace's clock.
console.log(`bench-time-origin ${performance.timeOrigin}`);
