/** The cell an InFlightMap keeps its value in; emptied when the entry is deleted. */
interface Cell<V> {
  value: V | undefined;
}

/**
 * A Map for entries that come and go with each request (calls in flight, jobs running), in a
 * map that lives as long as the process.
 *
 * Why not a plain Map: V8 rebuilds a Map's hash table every few dozen insertions when entries
 * keep being added and deleted, and allocates the new table in the generation the old one was
 * in. Once a long-lived map's table is in the old generation, each table it drops stays there,
 * entries and all, until the next full collection, and the young-generation collector treats
 * what those dead tables point to as alive. A request that was in flight when its map rebuilt
 * its table was therefore kept through two collections and promoted, everything it references
 * with it: in the gateway's closed loop that was most of every chat request (about 7 MB per
 * scavenge, 8-15 ms pauses, and old-generation growth that only mark-compacts freed).
 *
 * Here the table holds a small cell per entry, and delete() empties the cell first, so a dropped
 * table keeps at most the keys and empty cells alive, never what the values referenced.
 */
export class InFlightMap<K, V> {
  private readonly cells = new Map<K, Cell<V>>();

  get size(): number {
    return this.cells.size;
  }

  get(key: K): V | undefined {
    return this.cells.get(key)?.value;
  }

  has(key: K): boolean {
    return this.cells.has(key);
  }

  set(key: K, value: V): this {
    const cell = this.cells.get(key);
    if (cell) cell.value = value;
    else this.cells.set(key, { value });
    return this;
  }

  delete(key: K): boolean {
    const cell = this.cells.get(key);
    if (!cell) return false;
    cell.value = undefined;
    return this.cells.delete(key);
  }

  keys(): IterableIterator<K> {
    return this.cells.keys();
  }

  /** The values, as a copy: callers may delete entries while going through them. */
  values(): V[] {
    return Array.from(this.cells.values(), (cell) => cell.value as V);
  }
}
