/**
 * Experiment (issue #10, docs/methodology.md "Experiments"): an asset-level trend gate on buys
 * (`SignalModel.trendGate`) added to model v2, its lookback chosen walk-forward from
 * {50, 100, 200} days jointly with v2's bands, by the same objective as v2 (pooled long/short
 * Sharpe on all decision days up to Y-01-01 minus 31 days), scored 2020-01-01 → the data's end
 * at 10 bps. Prints one Markdown row per variant with the eight targets of the issue.
 *
 *   node --import tsx scripts/experiments/trend-gate.ts [variants] [lookbacks] [ls|lf]
 *   variants: comma list of v2 | {sma,tsmom,both}-{confirm,immediate} (default all)
 *   node --import tsx scripts/experiments/trend-gate.ts episodes [lookback, 0 = v2]
 *   prints the worst long/flat drawdown episode of the altcoins that miss the target.
 */
import { assetMetrics, pooledMetrics, type SignalDay } from '../../src/engine/backtest.ts';
import { MODEL_V2_GRID, modelV2, type SignalModel } from '../../src/engine/signal.ts';
import { addDays } from '../../src/engine/util.ts';
import { DatasetProvider } from '../../src/providers/dataset/dataset.ts';
import { type AssetWindowMetrics, withSeriesMemo } from '../../src/services/backtest.ts';
import { targets } from '../../src/services/backtest-format.ts';
import { MarketService } from '../../src/services/market.ts';

const COST = 10;
const market = await MarketService.create(new DatasetProvider('data'), null);
const src = withSeriesMemo(market);

type Gate = NonNullable<SignalModel['trendGate']>;
const gated = (bands: SignalModel['bands'], gate: Gate): SignalModel => ({
  ...modelV2(bands),
  version: 'signals-v3-experiment',
  trendGate: gate,
});

function daysOf(model: SignalModel): Map<string, SignalDay[]> {
  const out = new Map<string, SignalDay[]>();
  for (const [asset, series] of src.seriesFor(model)) {
    const c = src.data.candles.get(asset)!;
    out.set(
      asset,
      series.map((s, i) => ({ date: s.as_of, close: c[i]!.close, signal: s.signal, score: s.score, confidence: s.confidence })),
    );
  }
  return out;
}

function walkForward(name: string, grid: SignalModel[], objective: 'ls' | 'lf', lookbacks: string): void {
  const choices: { year: number; m: SignalModel }[] = [];
  for (let y = 2020; y <= Number(src.asOf.slice(0, 4)); y++) {
    const through = addDays(`${y}-01-01`, -31);
    let best = grid[0]!;
    let bo = -Infinity;
    for (const m of grid) {
      const pm = pooledMetrics([...daysOf(m).values()], '1970-01-01', through, COST);
      const o = (objective === 'lf' ? pm.long_flat.sharpe : pm.long_short.sharpe) ?? -Infinity;
      if (o > bo) [bo, best] = [o, m];
    }
    choices.push({ year: y, m: best });
  }
  const per = new Map(choices.map((c) => [c.year, daysOf(c.m)]));
  const first = choices[0]!.year;
  const last = choices.at(-1)!.year;
  const pool: SignalDay[][] = [];
  const assets: AssetWindowMetrics[] = [];
  for (const a of src.data.assets) {
    const seq = per.get(first)!.get(a.asset);
    if (!seq) continue;
    const d = seq.map((x, i) => per.get(Math.min(Math.max(Number(x.date.slice(0, 4)), first), last))!.get(a.asset)![i]!);
    const m = assetMetrics(d, '2020-01-01', src.asOf, COST);
    if (m.days === 0) continue;
    pool.push(d);
    assets.push({ asset: a.asset, symbol: a.symbol, ...m });
  }
  const pooled = pooledMetrics(pool, '2020-01-01', src.asOf, COST);
  const t = targets({
    model_version: name,
    mode: 'walk_forward',
    from: '2020-01-01',
    to: src.asOf,
    cost_bps: COST,
    bands: null,
    choices: [],
    pooled,
    assets,
  });
  const chosen = choices.map((c) => `${c.m.trendGate?.days ?? '–'}/${c.m.bands.buy}`).join(' ');
  console.log(`| ${name} (${lookbacks}; ${objective}) | ${t.map((x) => x.value + (x.met ? '' : ' ✗')).join(' | ')} | ${chosen} |`);
}

const ALTS = ['ripple', 'solana', 'dogecoin', 'cardano', 'chainlink', 'avalanche-2', 'litecoin'];
function episodes(days: number): void {
  const bands = { buy: 0.25, strong: 0.5 };
  const m = days > 0 ? gated(bands, { kind: 'sma', days, exit: 'confirm' }) : modelV2(bands);
  for (const [asset, series] of src.seriesFor(m)) {
    if (!ALTS.includes(asset)) continue;
    const c = src.data.candles.get(asset)!;
    let [eq, peak, prev, worst, pd, wp, wt] = [1, 1, 0, 0, '', '', ''];
    for (let i = 0; i < c.length - 1; i++) {
      if (c[i]!.date < '2020-01-01') continue;
      const pos = series[i]!.signal.endsWith('buy') ? 1 : 0;
      eq *= 1 + pos * (c[i + 1]!.close / c[i]!.close - 1) - Math.abs(pos - prev) * (COST / 10000);
      prev = pos;
      if (eq > peak) [peak, pd] = [eq, c[i + 1]!.date];
      if (eq / peak - 1 < worst) [worst, wp, wt] = [eq / peak - 1, pd, c[i + 1]!.date];
    }
    const inEp = series.filter((s) => s.as_of >= wp && s.as_of <= wt);
    const held = inEp.filter((s) => s.signal.endsWith('buy')).length;
    console.log(`${asset}: ${(worst * 100).toFixed(0)}% from ${wp} to ${wt}, long on ${held} of ${inEp.length} days`);
  }
}

const [arg1, arg2, arg3] = process.argv.slice(2);
if (arg1 === 'episodes') episodes(Number(arg2 ?? 0));
else {
  const lookbacks = arg2 ?? '50,100,200';
  const objective = arg3 === 'lf' ? 'lf' : 'ls';
  for (const v of (arg1 ?? 'v2,sma-confirm,sma-immediate,tsmom-confirm,tsmom-immediate,both-confirm,both-immediate').split(',')) {
    if (v === 'v2') {
      walkForward(v, MODEL_V2_GRID.map(modelV2), objective, '–');
      continue;
    }
    const [kind, exit] = v.split('-') as [Gate['kind'], Gate['exit']];
    const grid = lookbacks.split(',').flatMap((d) => MODEL_V2_GRID.map((b) => gated(b, { kind, days: Number(d), exit })));
    walkForward(v, grid, objective, lookbacks);
  }
}
