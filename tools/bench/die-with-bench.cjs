'use strict';
// Preloaded (`node --require`, see dieWithBench in bench-env.mjs) into every process a bench
// starts, so that it ends when the bench does, however the bench ended. A bench killed with
// SIGKILL runs no handler; the services it started are built to outlive a lost parent, and would
// go on holding its database and Redis keys and taking CPU from the next run's measurement.
//
// The link is a descriptor only the bench holds the other end of: the IPC channel when the bench
// has one, else a socket pair on fd 3. The kernel closes the bench's end whatever killed it, and
// the read here ends. Nothing polls, so nothing is added to what the process measures. SIGTERM,
// not exit: a service drains and closes as it does in a pod.
const fs = require('node:fs');
const net = require('node:net');

const stop = () => process.kill(process.pid, 'SIGTERM');
if (process.channel) {
  process.once('disconnect', stop);
} else {
  let linked = false;
  try {
    linked = fs.fstatSync(3).isSocket();
  } catch {
    // No fd 3: started by hand, not by a bench; nothing to follow.
  }
  if (linked) {
    const link = new net.Socket({ fd: 3, readable: true, writable: false });
    link.once('end', stop);
    link.once('error', stop);
    link.resume();
    // The link must not keep a process alive that would otherwise end.
    link.unref();
  }
}
