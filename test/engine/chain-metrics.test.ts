import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { computeChainMetrics } from '../../src/engine/chain-metrics.ts';

describe('computeChainMetrics', () => {
  const tvl = [
    { date: '2025-01-01', value: 100 },
    { date: '2025-01-02', value: 110 },
    { date: '2025-01-08', value: 120 },
    { date: '2025-01-09', value: 132 },
  ];

  it('7-day change against the value exactly 7 days before the value date', () => {
    const r = computeChainMetrics({ tvl }, '2025-01-09');
    assert.deepEqual(r.tvl, { value: 132, change_7d: 22, change_7d_pct: 20, as_of: '2025-01-09' });
  });

  it('a gap on the base day gives null changes (no nearby day is used)', () => {
    // 2025-01-10 has no value -> newest is 01-09... use asOf 01-08: base 01-01 exists
    assert.deepEqual(computeChainMetrics({ tvl }, '2025-01-08').tvl, { value: 120, change_7d: 20, change_7d_pct: 20, as_of: '2025-01-08' });
    const gap = [
      { date: '2025-01-01', value: 100 },
      { date: '2025-01-03', value: 105 },
      { date: '2025-01-09', value: 130 },
    ];
    // base day 2025-01-02 is missing although 01-01 and 01-03 exist
    assert.deepEqual(computeChainMetrics({ gap }, '2025-01-09').gap, {
      value: 130,
      change_7d: null,
      change_7d_pct: null,
      as_of: '2025-01-09',
    });
  });

  it('keeps the value date when the source stopped, and is point-in-time', () => {
    const r = computeChainMetrics({ tvl }, '2025-03-01');
    assert.equal(r.tvl!.as_of, '2025-01-09');
    const early = computeChainMetrics({ tvl }, '2025-01-05');
    assert.deepEqual(early.tvl, { value: 110, change_7d: null, change_7d_pct: null, as_of: '2025-01-02' });
  });

  it('every key is present; no data -> nulls; zero base -> null pct; negative base keeps the sign of the change', () => {
    const r = computeChainMetrics(
      {
        empty: [],
        later: [{ date: '2026-01-01', value: 1 }],
        zero: [
          { date: '2025-01-01', value: 0 },
          { date: '2025-01-08', value: 5 },
        ],
        flows: [
          { date: '2025-01-01', value: -200 },
          { date: '2025-01-08', value: -100 },
        ],
      },
      '2025-01-08',
    );
    assert.deepEqual(r.empty, { value: null, change_7d: null, change_7d_pct: null, as_of: null });
    assert.deepEqual(r.later, { value: null, change_7d: null, change_7d_pct: null, as_of: null });
    assert.deepEqual(r.zero, { value: 5, change_7d: 5, change_7d_pct: null, as_of: '2025-01-08' });
    assert.deepEqual(r.flows, { value: -100, change_7d: 100, change_7d_pct: 50, as_of: '2025-01-08' });
  });
});
