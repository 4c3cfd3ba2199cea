import { outputKey } from './output-keys';

describe('outputKey', () => {
  const now = new Date('2026-03-04T05:06:07Z');

  it('puts outputs under the billed namespace, by date', () => {
    expect(outputKey({ namespace: 'acme' }, 'a.png', now)).toBe('acme/outputs/2026/03/04/a.png');
  });

  it('uses the target repository and directory when given', () => {
    expect(outputKey({ namespace: 'acme', repo: 'renders', directory: 'shots/day-1/' }, 'a.mp4', now)).toBe('acme/repos/renders/shots/day-1/a.mp4');
    expect(outputKey({ namespace: 'acme', repo: 'renders' }, 'a.mp4', now)).toBe('acme/repos/renders/a.mp4');
    expect(outputKey({ namespace: 'acme', directory: '/drafts' }, 'a.png', now)).toBe('acme/outputs/drafts/a.png');
  });

  it('refuses directories and repositories that could leave the namespace', () => {
    for (const directory of ['../other', 'a/../../b', 'a\\b', 'a/./b', '%2e%2e']) {
      expect(() => outputKey({ namespace: 'acme', directory }, 'a.png', now)).toThrow(/target_directory must be a relative path/);
    }
    expect(() => outputKey({ namespace: 'acme', repo: '../x' }, 'a.png', now)).toThrow(/target_repo/);
  });
});
