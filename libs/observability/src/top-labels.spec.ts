import { TopLabels } from './top-labels';

describe('TopLabels', () => {
  it('keeps the most frequent keys as their own label and folds the rest into other', () => {
    const labels = new TopLabels(2, 100);
    for (let i = 0; i < 5; i++) labels.label('heavy');
    for (let i = 0; i < 3; i++) labels.label('medium');
    expect(labels.label('light')).toBe('other');
    expect(labels.label('heavy')).toBe('heavy');
    expect(labels.label('medium')).toBe('medium');
    // A key that comes to be seen more often than one of the top two takes its place.
    for (let i = 0; i < 10; i++) labels.label('rising');
    expect(labels.label('rising')).toBe('rising');
    expect(labels.label('medium')).toBe('other');
  });

  it('forgets the least seen keys past the tracked bound, however many tenants pass through', () => {
    const labels = new TopLabels(3, 50);
    for (let i = 0; i < 20; i++) labels.label('steady');
    const seen = new Set<string>();
    for (let i = 0; i < 10_000; i++) seen.add(labels.label(`tenant-${i}`));
    expect(labels.label('steady')).toBe('steady');
    // At most the top three ever had a label of their own, plus other.
    expect(seen.size).toBeLessThanOrEqual(4);
  });
});
