// The process supervisor behind `npm start`: runs each service as a child process, restarts one
// that exits unexpectedly (with backoff, printing its last lines), and gives up only on a crash
// loop. One service's bug must not take the other five down with it. Node builtins only.

/** Recent output of a child, so a crash report can show what it said last. */
class Tail {
  constructor(size) {
    this.size = size;
    this.lines = [];
  }
  push(line) {
    this.lines.push(line);
    if (this.lines.length > this.size) this.lines.shift();
  }
}

function forwardLines(stream, onLine) {
  let buffered = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk) => {
    buffered += chunk;
    const lines = buffered.split('\n');
    buffered = lines.pop();
    for (const line of lines) onLine(line);
  });
}

/**
 * @param {{name: string}[]} apps
 * @param {{
 *   spawnApp: (app: {name: string}) => import('node:child_process').ChildProcess,
 *   onLine?: (app: {name: string}, line: string, stream: 'stdout' | 'stderr') => void,
 *   log?: (message: string) => void,
 *   crashLoopExits?: number, crashLoopWindowMs?: number,
 *   firstRestartDelayMs?: number, maxRestartDelayMs?: number, tailLines?: number,
 *   stopTimeoutMs?: number,
 *   onGiveUp?: (app: {name: string}, reason: string) => void,
 * }} opts
 */
export function supervise(apps, opts) {
  const {
    spawnApp,
    onLine = () => {},
    log = (m) => console.error(m),
    crashLoopExits = 5,
    crashLoopWindowMs = 60_000,
    firstRestartDelayMs = 500,
    maxRestartDelayMs = 15_000,
    tailLines = 20,
    stopTimeoutMs = 30_000,
    onGiveUp = () => {},
  } = opts;
  const children = new Map();
  const exits = new Map(apps.map((a) => [a.name, []]));
  const restarts = new Map(apps.map((a) => [a.name, 0]));
  const timers = new Set();
  let stopping = false;
  let stopped;

  const launch = (app) => {
    const child = spawnApp(app);
    const tail = new Tail(tailLines);
    children.set(app.name, child);
    for (const name of ['stdout', 'stderr']) {
      if (!child[name]) continue;
      forwardLines(child[name], (line) => {
        tail.push(line);
        onLine(app, line, name);
      });
    }
    child.on('exit', (code, signal) => {
      if (children.get(app.name) === child) children.delete(app.name);
      if (stopping) return;
      const now = Date.now();
      const recent = exits.get(app.name).filter((t) => now - t < crashLoopWindowMs);
      recent.push(now);
      exits.set(app.name, recent);
      const how = signal ?? `code ${code}`;
      const last = tail.lines.length ? `; its last lines:\n    ${tail.lines.join('\n    ')}` : '';
      if (recent.length >= crashLoopExits) {
        const reason = `${app.name} exited ${recent.length} times within ${Math.round(crashLoopWindowMs / 1000)} s (last: ${how}); giving up and stopping atelier${last}`;
        log(reason);
        onGiveUp(app, reason);
        void stop(1);
        return;
      }
      const delay = Math.min(firstRestartDelayMs * 2 ** (recent.length - 1), maxRestartDelayMs);
      restarts.set(app.name, restarts.get(app.name) + 1);
      log(`${app.name} exited unexpectedly (${how}); restarting it in ${delay} ms${last}`);
      const timer = setTimeout(() => {
        timers.delete(timer);
        if (!stopping) launch(app);
      }, delay);
      timers.add(timer);
    });
  };

  /** Stops every child (SIGTERM, then SIGKILL after stopTimeoutMs); resolves with `code` once all are gone. */
  const stop = (code = 0) => {
    if (stopped) return stopped;
    stopping = true;
    for (const t of timers) clearTimeout(t);
    timers.clear();
    stopped = new Promise((resolve) => {
      const live = [...children.values()];
      if (live.length === 0) return resolve(code);
      let left = live.length;
      const force = setTimeout(() => {
        for (const c of live) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
      }, stopTimeoutMs);
      force.unref?.();
      for (const c of live) {
        const done = () => {
          if (--left === 0) {
            clearTimeout(force);
            resolve(code);
          }
        };
        if (c.exitCode !== null || c.signalCode !== null) done();
        else {
          c.once('exit', done);
          c.kill('SIGTERM');
        }
      }
    });
    return stopped;
  };

  for (const app of apps) launch(app);
  return {
    stop,
    get stopping() {
      return stopping;
    },
    /** How many times each app was restarted after an unexpected exit. */
    restarts: () => Object.fromEntries(restarts),
    pid: (name) => children.get(name)?.pid,
  };
}
