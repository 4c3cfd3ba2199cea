// Kubernetes memory quantities, as a container's resources.limits.memory spells them.
const QUANTITY_UNITS = { k: 1e3, K: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60 };

/**
 * A Kubernetes memory quantity ("512Mi", "1.5Gi", "1G", "1048576") in bytes, as a pod's
 * `resources.limits.memory` reads. Shared by manifests.spec.ts and bench:chat's BENCH_POD_MEMORY,
 * so a size means the same in a manifest and in a measurement of it. (Not in manifests.mjs: its
 * top-level await keeps the specs, which load scripts through require, from loading it.)
 */
export function memoryBytes(quantity) {
  const m = /^(\d+(?:\.\d+)?)([kKMGTPE]i?)?$/.exec(String(quantity).trim());
  const unit = m && (m[2] === undefined ? 1 : QUANTITY_UNITS[m[2]]);
  if (!unit) throw new Error(`not a memory quantity such as 512Mi: "${quantity}"`);
  return Math.ceil(Number(m[1]) * unit);
}
