import { computeRegimeSeries, regimeAt } from '../../src/engine/regime.ts';
import { computeChainHealthSeries } from '../../src/engine/chain-health.ts';
import { computeSignalSeries } from '../../src/engine/signal.ts';
import { rsiWilder, sma } from '../../src/engine/indicators.ts';
import { ASSETS, loadCandles, loadChain, loadFearGreed, loadFunding } from './real-data.ts';
const fg = loadFearGreed();
const data = ASSETS.map(a => ({a, candles: loadCandles(a.file), fund: a.funding ? loadFunding(a.funding) : null, metrics: a.chain ? loadChain(a.chain.file) : null}));
const btc = data[0]!;
for (let rep=0; rep<Number(process.env.REPS ?? 5); rep++){
  let t = performance.now();
  const reg = computeRegimeSeries({ btc: btc.candles, fearGreed: fg, funding: btc.fund! });
  const tr = performance.now()-t; t = performance.now();
  let tc=0, ts=0, ti=0;
  for (const d of data) {
    let t0 = performance.now();
    const ch = d.a.chain ? computeChainHealthSeries({ chain: d.a.chain.id, metrics: d.metrics!, regimeByDate: x => regimeAt(reg, x)?.regime ?? 'neutral', dates: d.candles.map(c=>c.date) }) : null;
    tc += performance.now()-t0; t0 = performance.now();
    computeSignalSeries({ asset: d.a.asset, candles: d.candles, fearGreed: fg, funding: d.fund, regime: reg, chainHealth: ch, sources: { prices: 'p', fear_greed: 'f', funding: 'x', chain_health: null } });
    ts += performance.now()-t0; t0 = performance.now();
    const cl = d.candles.map(c=>c.close); sma(cl,200); sma(cl,50); rsiWilder(cl);
    ti += performance.now()-t0;
  }
  console.log(`regime ${tr.toFixed(0)} chain ${tc.toFixed(0)} signal ${ts.toFixed(0)} (indicators alone ${ti.toFixed(0)})`);
}
