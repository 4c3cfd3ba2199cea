import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { InFlightMap } from './in-flight-map';

/**
 * What a long-lived registry of calls in flight does per request, as the gateway's RPC client
 * does it: an entry for the request's state (here ~100 KB of small objects, like a request's
 * graph) added, other calls coming and going meanwhile, then the entry deleted. Prints how much
 * the old generation grew once young-generation collections ran, i.e. what they promoted, for a
 * plain Map or for InFlightMap. In a process of its own per kind (its heap holds nothing else,
 * gc() is exposed, and V8's allocation-site feedback from one kind cannot pretenure the other's
 * objects), which loads in-flight-map.ts through Node's type stripping.
 */
const PROMOTION_PROBE = `
import v8 from 'node:v8';
const [kind, moduleUrl] = process.argv.slice(-2);
const { InFlightMap } = await import(moduleUrl);
const make = () => (kind === 'plain' ? new Map() : new InFlightMap());
const oldGeneration = () => v8.getHeapSpaceStatistics()
  .filter((s) => s.space_name === 'old_space' || s.space_name === 'large_object_space')
  .reduce((sum, s) => sum + s.space_used_size, 0);
function promotedByChurn(map) {
  // The registry has lived a while: it and its hash table are in the old generation.
  for (let i = 0; i < 8; i++) map.set('warm-' + i, {});
  for (let i = 0; i < 8; i++) map.delete('warm-' + i);
  gc(); gc();
  const before = oldGeneration();
  for (let request = 0; request < 20; request++) {
    map.set('call-' + request, Array.from({ length: 2000 }, (_, i) => ({ i, text: 'part ' + i })));
    for (let other = 0; other < 40; other++) { map.set('other-' + request + '-' + other, 1); map.delete('other-' + request + '-' + other); }
    map.delete('call-' + request);
  }
  for (let i = 0; i < 3; i++) gc({ type: 'minor' });
  return oldGeneration() - before;
}
// Once first: a first run also allocates its code's feedback, in the old generation.
promotedByChurn(make());
console.log(promotedByChurn(make()));
`;

describe('InFlightMap', () => {
  it('behaves as a map: set, get, has, size, keys and values; delete says whether there was an entry', () => {
    const map = new InFlightMap<string, { n: number }>();
    expect(map.set('a', { n: 1 })).toBe(map);
    map.set('b', { n: 2 }).set('a', { n: 3 });
    expect(map.size).toBe(2);
    expect(map.get('a')).toEqual({ n: 3 });
    expect(map.has('b')).toBe(true);
    expect([...map.keys()]).toEqual(['a', 'b']);
    expect(map.values()).toEqual([{ n: 3 }, { n: 2 }]);
    expect(map.delete('a')).toBe(true);
    expect(map.delete('a')).toBe(false);
    expect(map.get('a')).toBeUndefined();
    expect(map.has('a')).toBe(false);
    expect(map.size).toBe(1);
  });

  it('values() is a copy, so entries can be deleted while going through them (as shutdown does)', () => {
    const map = new InFlightMap<number, string>();
    for (let i = 0; i < 5; i++) map.set(i, `call ${i}`);
    const seen: string[] = [];
    for (const value of map.values()) {
      seen.push(value);
      map.delete(seen.length - 1);
    }
    expect(seen).toEqual(['call 0', 'call 1', 'call 2', 'call 3', 'call 4']);
    expect(map.size).toBe(0);
  });

  it('does not get the values of deleted entries promoted, where a plain Map in the old generation does (V8 keeps its dropped hash tables there)', () => {
    const promoted = (kind: 'plain' | 'in-flight') => {
      const probe = spawnSync(
        process.execPath,
        ['--expose-gc', '--min-semi-space-size=16', '--no-warnings', '--input-type=module', '-e', PROMOTION_PROBE, kind, pathToFileURL(path.join(__dirname, 'in-flight-map.ts')).href],
        { encoding: 'utf8' },
      );
      expect(probe.stderr).toBe('');
      return Number(probe.stdout);
    };
    const plain = promoted('plain');
    const inFlight = promoted('in-flight');
    // The plain Map: most of the 20 requests' ~2 MB outlived their deletion and was promoted.
    expect(plain).toBeGreaterThan(1_500_000);
    // Here only keys and empty cells may be.
    expect(inFlight).toBeLessThan(plain / 5);
  });
});
