// Which slow requests of a bench:chat run were in flight while a service paused for garbage
// collection. Run bench:chat with
//   BENCH_TRACE=var/trace.jsonl BENCH_SERVICE_LOGS=var/logs BENCH_SERVICE_FLAGS=--trace-gc
// then: node tools/bench/gc-episodes.mjs var/trace.jsonl var/logs [slower-than-ms, default 8]
// For each fixed-rate run through the gateway it prints the episodes of slow requests (requests
// slower than the threshold less than 30 ms apart), the pauses of at least 1 ms in any service that
// overlap each, and how many slow requests overlapped none. GC times are placed on the trace's
// clock through each process's time origin (tools/bench/time-origin.mjs), to within a few ms.
import fs from 'node:fs';
import path from 'node:path';

const [traceFile, logDir, threshold = '8'] = process.argv.slice(2);
if (!traceFile || !logDir) {
  console.error('usage: node tools/bench/gc-episodes.mjs <BENCH_TRACE file> <BENCH_SERVICE_LOGS dir> [slower-than-ms]');
  process.exit(2);
}
const slowerThan = Number(threshold);

/** Every GC pause of every service log that has a time origin: [start, end] in epoch ms. */
const pauses = [];
for (const file of fs.readdirSync(logDir)) {
  const log = fs.readFileSync(path.join(logDir, file), 'utf8');
  const origin = Number(/^bench-time-origin ([\d.]+)$/m.exec(log)?.[1]);
  if (!origin) continue;
  const service = file.replace(/-\d+\.log$/, '');
  // V8 prints the line when the pause ends: "[pid:isolate]   1234 ms: Scavenge ... MB, 2.51 / 0.00 ms ..."
  for (const m of log.matchAll(/^\[\d+:\w+\]\s+(\d+) ms: (Scavenge|Mark-Compact|Minor Mark-Sweep)\b.*?, ([\d.]+) \/ [\d.]+ ms/gm)) {
    const end = origin + Number(m[1]);
    const pause = Number(m[3]);
    if (pause >= 1) pauses.push({ service, kind: m[2], pause, start: end - pause, end });
  }
}
if (pauses.length === 0) console.log(`no GC pauses found in ${logDir} (run the services with BENCH_SERVICE_FLAGS=--trace-gc)`);

for (const line of fs.readFileSync(traceFile, 'utf8').trim().split('\n')) {
  const run = JSON.parse(line);
  if (run.target === 'fixed') continue; // the direct run: no service in its path
  // Entries: [ms since the run started, first byte ms, whole answer ms, epoch ms when sent].
  const started = run.trace[0][3] - run.trace[0][0];
  const slow = run.trace.filter(([, first]) => first > slowerThan).map(([, first, , sent]) => ({ sent, done: sent + first, ms: first }));
  const during = (r) => pauses.filter((p) => p.start < r.done && p.end > r.sent);
  const episodes = [];
  for (const r of slow) {
    const last = episodes.at(-1);
    if (last && r.sent - last.until < 30) {
      last.requests.push(r);
      last.until = Math.max(last.until, r.done);
    } else episodes.push({ from: r.sent, until: r.done, requests: [r] });
  }
  const overlapped = slow.filter((r) => during(r).length > 0).length;
  console.log(`\n${run.stream ? 'streaming' : 'non-streaming'} run: ${run.trace.length} requests, ${slow.length} slower than ${slowerThan} ms, ${overlapped} of them in flight during a GC pause`);
  for (const e of episodes) {
    const gcs = [...new Set(e.requests.flatMap(during))].map((p) => `${p.service} ${p.kind} ${p.pause.toFixed(1)} ms at +${(p.start - started).toFixed(0)}`);
    const max = Math.max(...e.requests.map((r) => r.ms));
    console.log(`  +${(e.from - started).toFixed(0).padStart(5)} ms  ${String(e.requests.length).padStart(3)} slow, max ${max.toFixed(1)} ms  ${gcs.join('; ') || '(no GC pause)'}`);
  }
}
