import { abortFollowing } from './abort-following';

describe('abortFollowing', () => {
  it('aborts with its parent, and with the parent reason', () => {
    const parent = new AbortController();
    const { controller } = abortFollowing(parent.signal);
    expect(controller.signal.aborted).toBe(false);
    parent.abort(new Error('client went away'));
    expect(controller.signal.aborted).toBe(true);
    expect((controller.signal.reason as Error).message).toBe('client went away');
  });

  it('starts aborted under an aborted parent, and aborting the child leaves the parent alone', () => {
    const gone = new AbortController();
    gone.abort('gone');
    expect(abortFollowing(gone.signal).controller.signal.reason).toBe('gone');
    const parent = new AbortController();
    abortFollowing(parent.signal).controller.abort();
    expect(parent.signal.aborted).toBe(false);
  });

  it('stops following once unlinked', () => {
    const parent = new AbortController();
    const { controller, unlink } = abortFollowing(parent.signal);
    unlink();
    parent.abort();
    expect(controller.signal.aborted).toBe(false);
  });
});
