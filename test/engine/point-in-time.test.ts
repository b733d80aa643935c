/**
 * Point-in-time check on the real bundled data: cutting every input after a date D must not
 * change any output dated <= D (BTC regime, chain health of eth and hype, ETH and HYPE signals).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { computeChainHealthSeries } from '../../src/engine/chain-health.ts';
import { computeRegimeSeries, regimeAt } from '../../src/engine/regime.ts';
import { computeSignalSeries } from '../../src/engine/signal.ts';
import type { ChainId, MetricPoint } from '../../src/engine/types.ts';
import { ASSETS, cut, loadCandles, loadChain, loadFearGreed, loadFunding } from './real-data.ts';

const SOURCES = { prices: 'p', fear_greed: 'f', funding: 'u', chain_health: 'c' };
const full = {
  btc: loadCandles('btc'),
  fg: loadFearGreed(),
  btcFunding: loadFunding('btc_daily'),
  eth: loadCandles('eth'),
  ethFunding: loadFunding('eth_daily'),
  hype: loadCandles('hype'),
  chains: { eth: loadChain('ethereum'), hype: loadChain('hyperliquid') } as Record<'eth' | 'hype', Record<string, MetricPoint[]>>,
};

/** The whole pipeline on inputs cut at `at` (or uncut). */
function pipeline(at: string | null) {
  const c = <T extends { date: string }>(xs: T[]) => (at ? cut(xs, at) : xs);
  const fg = c(full.fg);
  const regime = computeRegimeSeries({ btc: c(full.btc), fearGreed: fg, funding: c(full.btcFunding) });
  const health = (chain: ChainId, file: 'eth' | 'hype', dates: string[]) =>
    computeChainHealthSeries({
      chain,
      metrics: Object.fromEntries(Object.entries(full.chains[file]).map(([k, v]) => [k, c(v)])),
      regimeByDate: (d) => regimeAt(regime, d)?.regime ?? 'neutral',
      dates,
    });
  const eth = c(full.eth);
  const hype = c(full.hype);
  const ethHealth = health(
    'eth',
    'eth',
    eth.map((x) => x.date),
  );
  const hypeHealth = health(
    'hype',
    'hype',
    hype.map((x) => x.date),
  );
  const ethSignal = computeSignalSeries({
    asset: 'ethereum',
    candles: eth,
    fearGreed: fg,
    funding: c(full.ethFunding),
    regime,
    chainHealth: ethHealth,
    sources: SOURCES,
  });
  const hypeSignal = computeSignalSeries({
    asset: 'hyperliquid',
    candles: hype,
    fearGreed: fg,
    funding: null,
    regime,
    chainHealth: hypeHealth,
    sources: SOURCES,
  });
  return { regime, ethHealth, hypeHealth, ethSignal, hypeSignal };
}

/** JSON round trip: compares the plain shape (and materializes lazily built factor lists). */
const plain = (x: unknown) => JSON.parse(JSON.stringify(x));

describe('point-in-time (truncation) on real data', () => {
  const whole = pipeline(null);
  assert.ok(ASSETS.length === 11);
  for (const at of ['2019-06-15', '2021-11-10', '2023-03-12', '2024-12-20', '2025-04-20', '2025-09-29']) {
    it(`outputs dated <= ${at} are unchanged when inputs after ${at} are removed`, () => {
      const part = pipeline(at);
      const upTo = <T>(xs: T[], key: (x: T) => string) => xs.filter((x) => key(x) <= at);
      assert.ok(part.regime.length > 0);
      assert.deepStrictEqual(plain(part.regime), plain(upTo(whole.regime, (r) => r.as_of)));
      assert.deepStrictEqual(plain(part.ethHealth), plain(upTo(whole.ethHealth, (r) => r.date)));
      assert.deepStrictEqual(plain(part.hypeHealth), plain(upTo(whole.hypeHealth, (r) => r.date)));
      assert.deepStrictEqual(plain(part.ethSignal), plain(upTo(whole.ethSignal, (r) => r.as_of)));
      assert.deepStrictEqual(plain(part.hypeSignal), plain(upTo(whole.hypeSignal, (r) => r.as_of)));
      // the comparison must be about something: the last day has real content
      const last = part.ethSignal.at(-1)!;
      assert.equal(last.as_of, at);
      assert.ok(last.factors.length >= 4);
    });
  }

  it('the truncation test can fail: a look-ahead would be caught', () => {
    // Sanity check of the harness: changing one input after D changes some output after D only.
    const at = '2024-12-20';
    const btc = full.btc.map((x) => (x.date > at ? { ...x, close: x.close * 2 } : x));
    const r = computeRegimeSeries({ btc, fearGreed: full.fg, funding: full.btcFunding });
    assert.deepStrictEqual(plain(r.filter((x) => x.as_of <= at)), plain(whole.regime.filter((x) => x.as_of <= at)));
    assert.notDeepStrictEqual(plain(r), plain(whole.regime));
  });
});
