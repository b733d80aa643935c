/**
 * Experiment (issue #10, docs/methodology.md "Honesty"): the walk-forward with the *model*
 * chosen per year too, not only its bands. For each scored year Y from 2020, every candidate
 * (v1; v2 and v3 with each entry of their band grid; with ASYM=1 also v3 without its
 * volatility gate) is scored on all decision days up to Y-01-01 minus 31 days by the pooled
 * long/short Sharpe at 10 bps (the rule that chooses the served model's bands,
 * services/backtest.ts `chooseBands`; OBJ=long_flat for the long/flat Sharpe), the best one
 * is used for Y, and the out-of-sample years are concatenated as in `backtest --walk-forward`.
 * It measures what choosing among the project's published models on earlier data would have
 * given, that is, the track record without hindsight in the choice of the model.
 *
 *   node --import tsx scripts/experiments/model-selection.ts
 *   env: OBJ=long_short (default) | long_flat | targets (the count of the issue's eight
 *   targets met on the training window, see targetScore); ASYM=1 adds v3 without the gate.
 * Prints the choice of each year with every candidate's objective, then the issue's targets.
 */
import { assetMetrics, DEFAULT_COST_BPS, pooledMetrics, type SignalDay } from '../../src/engine/backtest.ts';
import { MODEL_V1, MODEL_V2_GRID, MODEL_V3_GRID, modelV2, modelV3, type SignalModel } from '../../src/engine/signal.ts';
import { addDays } from '../../src/engine/util.ts';
import { DatasetProvider } from '../../src/providers/dataset/dataset.ts';
import { targetChecks, targets } from '../../src/services/backtest-format.ts';
import {
  type AssetWindowMetrics,
  type BacktestReport,
  DEFAULT_FROM,
  daysOf,
  WALK_FORWARD_FIRST_YEAR,
} from '../../src/services/backtest.ts';
import { MarketService } from '../../src/services/market.ts';

const OBJ = process.env.OBJ === 'long_flat' ? 'long_flat' : process.env.OBJ === 'targets' ? 'targets' : 'long_short';

/**
 * OBJ=targets: how many of the issue's eight targets a candidate meets on the training window
 * (the "8 of 11 assets" ones scaled to the assets with data in the window: at least 8/11 of
 * them), ties broken by the pooled long/flat Sharpe (as 1e-3 of a target): `targetChecks`
 * (services/backtest-format.ts), the checks of the published track record.
 */
function targetScore(byAsset: Map<string, SignalDay[]>, through: string): number | null {
  const per = [...byAsset.values()].map((d) => assetMetrics(d, '1970-01-01', through, DEFAULT_COST_BPS)).filter((m) => m.days > 0);
  if (per.length === 0) return null;
  const p = pooledMetrics([...byAsset.values()], '1970-01-01', through, DEFAULT_COST_BPS);
  const met = targetChecks(per, p, (8 / 11) * per.length).filter((t) => t.met).length;
  return met + 1e-3 * (p.long_flat.sharpe ?? 0);
}
const src = await MarketService.create(new DatasetProvider('data'), null);
const to = src.asOf;
const lastYear = Number(to.slice(0, 4));

const candidates: { name: string; model: SignalModel }[] = [{ name: 'v1', model: MODEL_V1 }];
for (const b of MODEL_V2_GRID) candidates.push({ name: `v2 ${b.buy}/${b.strong}`, model: modelV2(b) });
for (const b of MODEL_V3_GRID) candidates.push({ name: `v3 ${b.buy}/${b.strong}`, model: modelV3(b) });
if (process.env.ASYM === '1')
  for (const b of MODEL_V3_GRID) candidates.push({ name: `v3-no-gate ${b.buy}/${b.strong}`, model: { ...modelV3(b), volGate: null } });

/** Signal days per asset of each candidate (services/backtest.ts `daysOf`; each model is read once, so no memo). */
const days = new Map<string, Map<string, SignalDay[]>>();
for (const c of candidates) days.set(c.name, daysOf(src, c.model));

const chosen = new Map<number, string>();
for (let y = WALK_FORWARD_FIRST_YEAR; y <= lastYear; y++) {
  const through = addDays(`${y}-01-01`, -31);
  let best: { name: string; v: number } | null = null;
  const row: string[] = [];
  for (const c of candidates) {
    const v =
      OBJ === 'targets'
        ? targetScore(days.get(c.name)!, through)
        : pooledMetrics([...days.get(c.name)!.values()], '1970-01-01', through, DEFAULT_COST_BPS)[OBJ].sharpe;
    row.push(`${c.name} ${v === null ? 'n/a' : v.toFixed(2)}`);
    // Ties go to the earlier candidate, as in chooseBands.
    if (v !== null && (best === null || v > best.v)) best = { name: c.name, v };
  }
  chosen.set(y, best!.name);
  console.log(`${y}: ${best!.name} (${OBJ === 'targets' ? 'targets met' : `pooled ${OBJ} Sharpe`} through ${through}: ${row.join(', ')})`);
}

const assets: AssetWindowMetrics[] = [];
const pool: SignalDay[][] = [];
for (const a of src.data.assets) {
  const first = days.get(candidates[0]!.name)!.get(a.asset);
  if (!first) continue;
  const seq = first.map((d, i) => {
    const y = Math.min(Math.max(Number(d.date.slice(0, 4)), WALK_FORWARD_FIRST_YEAR), lastYear);
    return days.get(chosen.get(y)!)!.get(a.asset)![i]!;
  });
  const m = assetMetrics(seq, DEFAULT_FROM, to, DEFAULT_COST_BPS);
  if (m.days === 0) continue;
  assets.push({ asset: a.asset, symbol: a.symbol, ...m });
  pool.push(seq);
}
const report: BacktestReport = {
  model_version: 'chosen per year',
  mode: 'walk_forward',
  from: DEFAULT_FROM,
  to,
  cost_bps: DEFAULT_COST_BPS,
  bands: null,
  choices: [],
  pooled: pooledMetrics(pool, DEFAULT_FROM, to, DEFAULT_COST_BPS),
  assets,
};
for (const t of targets(report)) console.log(`${t.met ? 'met ' : 'MISS'}  ${t.label}: ${t.value}`);
const lf = report.pooled.long_flat;
console.log(
  `pooled long/flat: Sharpe ${lf.sharpe?.toFixed(2)}, max drawdown ${(lf.max_drawdown * 100).toFixed(0)}%, exposure ${(lf.exposure * 100).toFixed(0)}%`,
);
