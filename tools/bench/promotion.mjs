#!/usr/bin/env node
// node tools/bench/promotion.mjs — how much of each Redis round trip outlives young-generation GC.
//
// Objects that survive two scavenges are promoted to the old generation, where only a
// Mark-Compact frees them; the services' Mark-Compacts (10-25 ms pauses) are what the 500 req/s
// tail is made of (docs/benchmarks.md). A request's objects live for about a millisecond, so next
// to none should be promoted. This runs the same paced loop of round trips (GET of a 1 KB value,
// one every GAP ms, default 2) twice in a child process with --trace-gc-nvp, at two counts, and
// reports the promoted bytes per round trip from the difference, which cancels start-up:
//   - ioredis: `await client.get(key)`, as every Redis call in atelier is made;
//   - net: the same request written on a plain socket and its reply read back.
// KINDS (comma-separated) adds the bisection's other cases, each on the plain socket:
//   - command: ioredis's own Command object per round trip (its promise resolved by the reply);
//   - resolver: an object per round trip keeping a pending promise's resolve function;
//   - resolver-closure: the same object keeping an arrow function that calls it, as Command does
//     (`this.resolve = this._convertValue(resolve)`);
//   - command-settle: Command changed as proposed to ioredis: it keeps the promise's own resolve and
//     reject and settles through prototype methods (no closure per command);
//   - pg: `client.query` on node-postgres (TEST_DATABASE_URL), which keeps `query.callback = (err, res) =>
//     ...` over its promise's resolve and reject: the same pattern in the other library on the hot path;
//   - pending-closure, pending-plain: no I/O at all, a promise settled at once by an object that keeps its
//     resolve function, with and without one more (never called) arrow function beside it: the whole
//     pattern, small enough for a V8 report.
// Env: TEST_REDIS_URL, TEST_DATABASE_URL (as the other benches), GAP, KINDS (default ioredis,net).
import { spawnSync } from 'node:child_process';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { benchPostgresUrl, benchRedisUrl, require } from './bench-env.mjs';

// ioredis does not export its Command class; the bisection builds one as ioredis does.
const Command = require('ioredis/built/Command').default;

/** Command as proposed upstream: the promise's own settle functions kept, converted in methods. */
class SettledCommand extends Command {
  initPromise() {
    this.promise = new Promise((resolve, reject) => {
      this.stringifyArguments();
      this.settleValue = resolve;
      this.settleError = reject;
    });
  }
  resolve(value) {
    try {
      this._clearTimers();
      this.settleValue(this.transformReply(value));
      this.isResolved = true;
    } catch (err) {
      this.reject(err);
    }
    return this.promise;
  }
  reject(err) {
    this._clearTimers();
    this.settleError(err);
  }
}

const self = fileURLToPath(import.meta.url);
const { hostname: redisHost, port } = new URL(benchRedisUrl);
const redisPort = Number(port || 6379);
const gap = Number(process.env.GAP ?? 2);
const key = `atelier-bench-promotion:${process.pid}`;

async function paced(n, roundTrip) {
  const start = performance.now();
  for (let i = 0; i < n; i++) {
    const wait = start + i * gap - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    await roundTrip();
  }
}

async function child(kind, n, childKey) {
  if (kind === 'ioredis') {
    const client = new Redis(benchRedisUrl);
    await paced(n, () => client.get(childKey));
    client.disconnect();
    return;
  }
  if (kind === 'pg') {
    const pg = require('pg');
    const client = new pg.Client({ connectionString: benchPostgresUrl });
    await client.connect();
    await paced(n, () => client.query('select $1::text as v', [childKey]));
    await client.end();
    return;
  }
  const io = {
    'pending-plain': () => {
      const held = {};
      held.promise = new Promise((resolve) => (held.resolve = resolve));
      held.resolve(childKey);
      return held.promise;
    },
    'pending-closure': () => {
      const held = {};
      held.promise = new Promise((resolve) => ((held.resolve = resolve), (held.other = () => childKey)));
      held.resolve(childKey);
      return held.promise;
    },
  };
  if (io[kind]) return paced(n, io[kind]);
  const socket = net.connect(redisPort, redisHost);
  await new Promise((r) => socket.once('connect', r));
  let answered;
  // Decoded as ioredis decodes a bulk reply, so both allocate the reply's string.
  socket.on('data', (chunk) => answered(chunk.toString('utf8')));
  const request = `*2\r\n$3\r\nGET\r\n$${Buffer.byteLength(childKey)}\r\n${childKey}\r\n`;
  const send = () => new Promise((r) => ((answered = r), socket.write(request)));
  // Each case builds its object per round trip, keeps it for the round trip, and drops it.
  const cases = {
    net: send,
    command: () => {
      const command = new Command('get', [childKey], { replyEncoding: 'utf8' });
      return send().then((text) => command.resolve(Buffer.from(text)));
    },
    'command-settle': () => {
      const command = new SettledCommand('get', [childKey], { replyEncoding: 'utf8' });
      return send().then((text) => command.resolve(Buffer.from(text)));
    },
    resolver: () => {
      const held = {};
      held.promise = new Promise((resolve) => (held.resolve = resolve));
      return send().then((text) => held.resolve(text));
    },
    'resolver-closure': () => {
      const held = {};
      held.promise = new Promise((resolve) => (held.resolve = (value) => resolve(value)));
      return send().then((text) => held.resolve(text));
    },
  };
  if (!cases[kind]) throw new Error(`unknown kind ${kind}: one of ioredis, pg, ${Object.keys(io).join(', ')}, ${Object.keys(cases).join(', ')}`);
  await paced(n, cases[kind]);
  socket.end();
}

if (process.argv[2] === 'child') {
  await child(process.argv[3], Number(process.argv[4]), process.argv[5]);
} else {
  const setup = new Redis(benchRedisUrl);
  await setup.set(key, 'v'.repeat(1000), 'EX', 600);
  /** Promoted and allocated bytes over one child run, from its --trace-gc-nvp lines. */
  const run = (kind, n) => {
    const out = spawnSync(process.execPath, ['--trace-gc-nvp', self, 'child', kind, String(n), key], { encoding: 'utf8', env: { ...process.env } });
    if (out.status !== 0) throw new Error(`${kind} child failed: ${out.stderr}`);
    const sum = (field) =>
      out.stdout
        .split('\n')
        .filter((line) => line.includes(' gc='))
        .reduce((total, line) => {
          const value = Number(line.match(new RegExp(` ${field}=(\\d+)`))?.[1] ?? 0);
          return total + (value < 1e12 ? value : 0);
        }, 0);
    return { promoted: sum('promoted'), allocated: sum('allocated') };
  };
  const [small, large] = [2_500, 10_000];
  console.log(`promoted per round trip (GET of 1 KB, one every ${gap} ms; difference of ${small} and ${large} round trips):`);
  for (const kind of (process.env.KINDS ?? 'ioredis,net').split(',')) {
    const a = run(kind, small);
    const b = run(kind, large);
    const per = (field) => (b[field] - a[field]) / (large - small);
    console.log(`  ${kind.padEnd(16)} promoted ${(per('promoted') / 1024).toFixed(2)} KB of ${(per('allocated') / 1024).toFixed(2)} KB allocated`);
  }
  await setup.del(key);
  setup.disconnect();
}
