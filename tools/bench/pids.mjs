/**
 * Whether a process of this machine still runs: how the benches tell what a killed run left
 * (its memory cgroups, its database and Redis keys) from what a running one uses. EPERM: it runs,
 * under another user.
 */
export function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === 'EPERM';
  }
}

/** Whether `name` is `<prefix><pid>...` of a process that is gone: something a killed run left. */
export function ownerGone(name, prefix) {
  if (!name.startsWith(prefix)) return false;
  const pid = Number.parseInt(name.slice(prefix.length), 10);
  return Number.isInteger(pid) && !alive(pid);
}
