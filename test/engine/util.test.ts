import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isoFormatter } from '../../src/engine/util.ts';

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
