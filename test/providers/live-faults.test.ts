import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createLiveSources, UpstreamError, type LiveSource, type UpstreamName } from '../../src/providers/live/index.ts';
import { startUpstream, type Fault, type Upstream } from '../helpers/upstream.ts';

/** Which fake upstream serves each series (the first request of a fetch goes there). */
function upstreamOf(s: LiveSource, up: Upstream): UpstreamName {
  const port = s.host.split(':')[1];
  return (Object.entries(up.baseUrls) as [UpstreamName, string][]).find(([, u]) => u.endsWith(`:${port}`))![0];
}

/**
 * Every source against the fake upstream with each transport fault: transient faults (429 with
 * Retry-After, 500, a connection destroyed mid-body) are retried and give the same points as
 * a clean fetch; persistent faults (hang, garbage) are an UpstreamError naming the source.
 */
describe('every live source under upstream faults', () => {
  let up: Upstream;
  before(async () => {
    up = await startUpstream();
    up.setToday('2025-06-15');
  });
  after(() => up.close());

  const fresh = (timeoutMs = 5000, retries = 2) =>
    createLiveSources({ baseUrls: up.baseUrls, timeoutMs, retries, retryMinTimeoutMs: 10, hostBudgetPerMinute: 10_000 });
  const run = (s: LiveSource) => s.fetch('2025-06-01', '2025-06-15');

  const transient: [string, Fault][] = [
    ['429 with Retry-After then success', { kind: 'status', status: 429, retryAfter: '0', times: 1 }],
    ['500 then success', { kind: 'status', status: 500, times: 1 }],
    ['503 twice then success', { kind: 'status', status: 503, times: 2 }],
    ['connection destroyed mid-body then success', { kind: 'destroy', times: 1 }],
    ['one hang (timeout) then success', { kind: 'hang', times: 1 }],
  ];
  for (const [name, fault] of transient) {
    test(name, async () => {
      // A short timeout only where a hang is expected (the machine may be loaded).
      const clean = fresh();
      const faulty = fresh(fault.kind === 'hang' ? 800 : 5000);
      for (let i = 0; i < clean.length; i++) {
        up.setNow(Date.parse('2025-06-15T00:00:00Z'));
        const want = await run(clean[i]!);
        const host = upstreamOf(faulty[i]!, up);
        const before = up.requestsBy[host];
        up.fault(host, fault);
        const got = await run(faulty[i]!);
        up.fault(host, null);
        assert.deepStrictEqual(got, want, faulty[i]!.series);
        assert.ok(up.requestsBy[host] - before > 1, `${faulty[i]!.series} retried`);
      }
    });
  }

  const persistent: [string, Fault, UpstreamError['kind']][] = [
    ['an upstream that hangs is a timeout', { kind: 'hang' }, 'timeout'],
    ['garbage is a format error', { kind: 'garbage' }, 'format'],
    ['500 on every attempt is an http error', { kind: 'status', status: 500 }, 'http'],
  ];
  for (const [name, fault, kind] of persistent) {
    test(name, async () => {
      for (const s of fault.kind === 'hang' ? fresh(400, 0) : fresh(5000, 1)) {
        const host = upstreamOf(s, up);
        up.fault(host, fault);
        await assert.rejects(run(s), (e: unknown) => {
          assert.ok(e instanceof UpstreamError, `${s.series}: ${String(e)}`);
          assert.equal(e.kind, kind, `${s.series}: ${e.message}`);
          assert.ok(e.message.startsWith(e.source), e.message);
          return true;
        });
        up.fault(host, null);
      }
    });
  }
});
