import { test } from 'node:test';
import assert from 'node:assert/strict';
import { OutageLog } from '../src/errors.ts';

test('an outage logs its first failure at once, then one line per 10 s that counts the failures between', () => {
  let now = 1_000_000;
  const lines: { obj: Record<string, unknown>; msg: string }[] = [];
  const log = { error: (obj: object, msg: string) => lines.push({ obj: obj as Record<string, unknown>, msg }) };
  const outage = new OutageLog(10_000, () => now);
  outage.error(log, { code: 'ECONNREFUSED' }, 'dependency unavailable');
  for (let i = 0; i < 99; i++) {
    now += 50; // 99 more requests over ~5 s: counted, not logged
    outage.error(log, { code: 'ECONNREFUSED' }, 'dependency unavailable');
  }
  assert.equal(lines.length, 1);
  assert.deepEqual(lines[0], { obj: { err: { code: 'ECONNREFUSED' } }, msg: 'dependency unavailable' });
  now = 1_000_000 + 10_000;
  outage.error(log, { code: '57P01' }, 'dependency unavailable', { tool: 'get_signals' });
  assert.equal(lines.length, 2);
  assert.deepEqual(lines[1], {
    obj: { err: { code: '57P01' }, tool: 'get_signals', more: 99 },
    msg: 'dependency unavailable (99 more since the previous line, 10 s ago)',
  });
  // After a quiet spell the next failure is logged at once, with nothing counted.
  now += 60_000;
  outage.error(log, { code: 'ECONNREFUSED' }, 'dependency unavailable');
  assert.deepEqual(lines[2], { obj: { err: { code: 'ECONNREFUSED' } }, msg: 'dependency unavailable' });
});

test('the failures counted at the end of an outage are written once the window has passed (flush, on a timer), not held for the next outage', () => {
  let now = 0;
  const lines: { obj: Record<string, unknown>; msg: string }[] = [];
  const log = { error: (obj: object, msg: string) => lines.push({ obj: obj as Record<string, unknown>, msg }) };
  const outage = new OutageLog(10_000, () => now);
  outage.error(log, { code: 'A' }, 'dependency unavailable');
  for (const code of ['B', 'C', 'D']) {
    now += 1000;
    outage.error(log, { code }, 'dependency unavailable');
  }
  assert.equal(lines.length, 1);
  now = 10_000;
  outage.flush(); // what the timer does when the window has passed
  assert.deepEqual(lines[1], {
    obj: { err: { code: 'D' }, more: 2 },
    msg: 'dependency unavailable (2 more since the previous line, 10 s ago)',
  });
  outage.flush();
  assert.equal(lines.length, 2, 'nothing left to write');
  // The next outage, much later, starts afresh.
  now = 7_200_000;
  outage.error(log, { code: 'E' }, 'dependency unavailable');
  assert.deepEqual(lines[2], { obj: { err: { code: 'E' } }, msg: 'dependency unavailable' });
});
