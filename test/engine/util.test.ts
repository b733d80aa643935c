import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DAY_MS, dayNumber, daysBetween, isoFormatter } from '../../src/engine/util.ts';
import { DAY_MS as ADAPTER_DAY_MS } from '../../src/providers/live/days.ts';

test('isoFormatter: the text of Date.prototype.toISOString for every instant, including repeats and going back', () => {
  const f = isoFormatter();
  const g = isoFormatter();
  const instants = [0, 1_700_000_000_000, 1_700_000_000_000, 1_700_000_000_001, 1_699_999_999_999, -1, 253_402_300_799_999];
  for (const ms of instants) assert.equal(f(ms), new Date(ms).toISOString());
  // Formatters are independent: another one's instants do not change this one's answers.
  assert.equal(g(5), '1970-01-01T00:00:00.005Z');
  assert.equal(f(1_700_000_000_001), '2023-11-14T22:13:20.001Z');
  assert.equal(g(5), '1970-01-01T00:00:00.005Z');
});

test('dayNumber: days since 1970-01-01; a malformed day and a day that does not exist are refused, each saying which', () => {
  assert.equal(dayNumber('1970-01-01'), 0);
  assert.equal(dayNumber('2024-02-29'), Date.UTC(2024, 1, 29) / 86_400_000);
  assert.equal(dayNumber('1900-03-01') - dayNumber('1900-02-28'), 1, '1900 is not a leap year');
  for (const bad of ['2024-1-01', '2024/01/01', '20x4-01-01', '2024-01-0a'])
    assert.throws(() => dayNumber(bad), { name: 'RangeError', message: `invalid day '${bad}' (expected YYYY-MM-DD)` });
  for (const missing of ['2025-02-30', '2023-02-29', '2024-13-01', '2024-04-31', '2024-00-10', '2024-01-00'])
    assert.throws(() => dayNumber(missing), {
      name: 'RangeError',
      message: `invalid day '${missing}': no such calendar date (expected an existing day, YYYY-MM-DD)`,
    });
});

test('daysBetween: whole UTC days from a to b (the one owner of this arithmetic: freshness, the dataset gaps and MCP data age use it)', () => {
  assert.equal(daysBetween('2024-02-28', '2024-03-01'), 2);
  assert.equal(daysBetween('2024-03-01', '2024-02-28'), -2);
  assert.equal(daysBetween('2025-12-31', '2025-12-31'), 0);
  assert.throws(() => daysBetween('2024-02-30', '2024-03-01'), RangeError, 'a day that does not exist is refused, not rolled over');
  assert.equal(ADAPTER_DAY_MS, DAY_MS, 'the live adapters use the engine constant');
});
