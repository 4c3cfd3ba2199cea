import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

type Parts = { total: number; compile: number; gc: number; requests: number; functions: Map<string, number> };
type Callgrind = {
  callgrindAvailable(): boolean;
  callgrindWrap(dir: string): (command: string, argv: string[]) => [string, string[]];
  countFrom(pids: number[]): void;
  dumpParts(text: string, jit?: (address: number) => string | undefined): Parts;
  jitNames(pid: number): (address: number) => string | undefined;
  instructionsDuring<T>(dir: string, groups: Record<string, number[]>, run: () => Promise<T>): Promise<[T, Record<string, Parts>]>;
};

let cg: Callgrind;
beforeAll(async () => {
  cg = (await import(pathToFileURL(path.join(__dirname, 'callgrind.mjs')).href)) as Callgrind;
});

describe('a callgrind dump split into its parts', () => {
  // Written as callgrind writes them: names given once and then referred to by number, and a
  // call's inclusive cost on the line after calls=, which the callee counts as its own already.
  const dump = [
    '# callgrind format',
    'events: Ir',
    'fn=(1) main',
    '0 100',
    'cfn=(2) v8::internal::compiler::GraphReducer::Reduce(v8::internal::compiler::Node*)',
    'calls=1 0',
    '0 40',
    '+2 5',
    'fn=(2)',
    '0 40',
    'fn=(3) v8::internal::Scavenger::ScavengeObject()',
    '* 7',
    'fn=(1)',
    '-1 3',
    'fn=(4) 0x0000000028271400',
    '0 20',
    'totals: 175',
  ].join('\n');

  it("counts each function's own instructions once, in the part its name says, and names V8's code by its address", () => {
    const jit = (address: number) => (address >= 0x28271000 && address < 0x28272000 ? 'JS:*handler app.js:12:3' : undefined);
    const { functions, ...parts } = cg.dumpParts(dump, jit);
    expect(parts).toEqual({ total: 175, compile: 40, gc: 7, requests: 128 });
    expect(Object.fromEntries(functions)).toEqual({
      main: 108,
      'v8::internal::compiler::GraphReducer::Reduce(v8::internal::compiler::Node*)': 40,
      'v8::internal::Scavenger::ScavengeObject()': 7,
      'JS:*handler app.js:12:3': 20,
    });
    // Without a map for it, machine code keeps the address callgrind gave it.
    expect(cg.dumpParts(dump).functions.get('0x0000000028271400')).toBe(20);
  });

  it('refuses a dump whose functions do not add up to its totals line, and text that is no dump', () => {
    expect(() => cg.dumpParts(dump.replace('totals: 175', 'totals: 195'))).toThrow('its totals line says 195');
    expect(() => cg.dumpParts('hello')).toThrow('no totals line');
  });
});

describe("V8's machine code named from a process's perf map", () => {
  // No process has this pid (above Linux's largest), so no running program writes this map.
  const pid = 2 ** 22 + 7;
  const map = `/tmp/perf-${pid}.map`;
  afterEach(() => fs.rmSync(map, { force: true }));

  it('names an address after the last region that holds it, as V8 reuses the memory of code it freed', () => {
    // As --perf-basic-prof appends them: a function, then another one put where part of it was once it was freed.
    fs.writeFileSync(map, ['1000 200 JS:*parse parser.js:26:10', '3000 100 JS:~render view.js:4:1', '1100 80 JS:*removeListener node:events:680:28', '5000 40 JS:^handler app.js:1:1', '5000 40 JS:*handler app.js:1:1', ''].join('\n'));
    const name = cg.jitNames(pid);
    expect(name(0x1000)).toBe('JS:*parse parser.js:26:10');
    expect(name(0x1120)).toBe('JS:*removeListener node:events:680:28');
    // Past the newer region, only the older one holds the address.
    expect(name(0x1190)).toBe('JS:*parse parser.js:26:10');
    expect(name(0x30ff)).toBe('JS:~render view.js:4:1');
    // Recompiled into the same place: the newer code's name.
    expect(name(0x5010)).toBe('JS:*handler app.js:1:1');
    expect(name(0x3100)).toBeUndefined();
    expect(name(0xfff)).toBeUndefined();
  });

  it('names nothing without a map', () => {
    expect(cg.jitNames(pid)(0x1000)).toBeUndefined();
  });
});

// valgrind is installed on every machine kind atelier is developed on; skipped, the bench's phase 6 refuses to run too.
const withValgrind = spawnSync('valgrind', ['--version']).status === 0;

(withValgrind ? describe : describe.skip)('a process counted under callgrind', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'atelier-callgrind-spec-'));
  let server: ChildProcess;
  let port = 0;
  const agent = new http.Agent({ keepAlive: true });
  const call = (n: number) =>
    (async () => {
      for (let i = 0; i < n; i++) {
        await new Promise<void>((resolve, reject) => {
          const req = http.request({ port, host: '127.0.0.1', method: 'POST', agent }, (res) => {
            res.resume();
            res.on('end', resolve);
          });
          req.on('error', reject);
          req.end(JSON.stringify({ messages: [{ role: 'user', content: `hello ${i}` }] }));
        });
      }
      return n;
    })();

  beforeAll(async () => {
    const program = `require('node:http').createServer((req, res) => { let b = ''; req.on('data', (d) => (b += d)); req.on('end', () => res.end(JSON.stringify({ n: JSON.parse(b).messages.length }))); }).listen(0, '127.0.0.1', function () { console.log(this.address().port); });`;
    // HOST as the services have it (the address they bind): callgrind_control must still find the process.
    server = spawn(...cg.callgrindWrap(dir)(process.execPath, ['--perf-basic-prof', '-e', program]), { env: { ...process.env, HOST: '127.0.0.1' }, stdio: ['ignore', 'pipe', 'inherit'] });
    port = await new Promise<number>((resolve) => server.stdout!.once('data', (d) => resolve(Number(String(d).trim()))));
    cg.countFrom([server.pid!]);
  }, 120_000);

  afterAll(async () => {
    agent.destroy();
    server.kill();
    await new Promise((r) => server.once('exit', r));
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(`/tmp/perf-${server.pid}.map`, { force: true });
  });

  it('counts what each run of requests executed, from zero each time, and removes its dumps', async () => {
    await call(300); // V8 compiles the hot code in the first few hundred.
    const [answered, many] = await cg.instructionsDuring(dir, { server: [server.pid!] }, () => call(400));
    const [, none] = await cg.instructionsDuring(dir, { server: [server.pid!] }, () => call(0));

    expect(answered).toBe(400);
    const { total, compile, gc, requests } = many.server;
    expect(total).toBe(compile + gc + requests);
    // Four hundred requests through node:http cost far more than the moment between two commands.
    expect(requests / 400).toBeGreaterThan(10_000);
    expect(none.server.total).toBeLessThan(total / 20);
    expect(fs.readdirSync(dir).filter((f) => /\.out\.\d+$/.test(f))).toEqual([]);
    // The program's own JavaScript, named from the map --perf-basic-prof wrote (the handler is `[eval]`'s).
    const js = [...many.server.functions].filter(([name]) => name.startsWith('JS:') && name.includes('[eval]'));
    expect(js.length).toBeGreaterThan(0);
  }, 180_000);

  it('says so when a process is not under callgrind, or gone, instead of counting nothing', async () => {
    await expect(cg.instructionsDuring(dir, { plain: [process.pid] }, async () => 0)).rejects.toThrow(`callgrind_control --zero ${process.pid}`);
    await expect(cg.instructionsDuring(dir, { gone: [2 ** 22 + 1] }, async () => 0)).rejects.toThrow(`no process ${2 ** 22 + 1}`);
  });
});
