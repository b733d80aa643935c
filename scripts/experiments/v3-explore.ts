/**
 * Exploration (issue #10, docs/methodology.md "Signal model v3"): level rules on top of v2's
 * score, evaluated walk-forward at 10 bps from 2020-01-01; each variant's free parameters (the
 * bands, and k or the threshold where present) are chosen per year on data before it by the
 * pooled long/short (ls) or long/flat (lf) Sharpe. Prints one Markdown row per variant.
 *
 *   node --import tsx scripts/experiments/v3-explore.ts <variants> [ls|lf]
 *   variants: comma list of v2 or names containing asym (exits at once), mom (buys need own
 *   TSMOM > 0), stop (trailing stop, k from KS), volA / volB / volD / volS (volatility gates),
 *   vmWF (gate threshold from VMS, walk-forward).
 *   env: NULLPASS=1 a gate without data is open; DD=1 per-asset DD ratios and Sharpes;
 *   BANDS=0.3 one grid entry only; DIAG=1 the in-sample up-rate diagnostic; H trailing-high days.
 * The engine's v3 (computeSignalSeries with MODEL_V3) reproduces `NULLPASS=1 ... asym-volD`.
 */
import { assetMetrics, pooledMetrics, type SignalDay } from '../../src/engine/backtest.ts';
import { levelWithHysteresis, MODEL_V2_GRID, modelV2, signalLevel, type SignalModel } from '../../src/engine/signal.ts';
import type { SignalLevel } from '../../src/engine/types.ts';
import { addDays, dayNumber } from '../../src/engine/util.ts';
import { DatasetProvider } from '../../src/providers/dataset/dataset.ts';
import { type AssetWindowMetrics } from '../../src/services/backtest.ts';
import { targets } from '../../src/services/backtest-format.ts';
import { MarketService } from '../../src/services/market.ts';

const COST = 10;
const market = await MarketService.create(new DatasetProvider('data'), null);
const base = market.seriesFor(modelV2(MODEL_V2_GRID[0]!));

interface Feat {
  date: string[];
  close: number[];
  score: number[];
  conf: number[];
  mom: (number | null)[]; // momentum factor score
  sd: (number | null)[];
  dd: (number | null)[]; // ln(close / max close over last H days) / (sd*sqrt(H))
  volr: (number | null)[]; // sd90 / median sd90 over the past 365 days
  volb: (number | null)[]; // sd90 / sd365
  vold: (number | null)[]; // downside semideviation 90 / 365
}
const H = Number(process.env.H ?? 30);
const feats = new Map<string, Feat>();
for (const [asset, series] of base) {
  const c = market.data.candles.get(asset)!;
  const dn = c.map((x) => dayNumber(x.date));
  const sd: (number | null)[] = [];
  const dd: (number | null)[] = [];
  const volr: (number | null)[] = [];
  const volb: (number | null)[] = [];
  const vold: (number | null)[] = [];
  for (let i = 0; i < c.length; i++) {
    const rs: number[] = [];
    for (let j = i; j > 0 && dn[j]! > dn[i]! - 90; j--) if (dn[j]! - dn[j - 1]! === 1) rs.push(c[j]!.close / c[j - 1]!.close - 1);
    let s: number | null = null;
    if (rs.length >= 60) {
      const m = rs.reduce((a, b) => a + b, 0) / rs.length;
      s = Math.sqrt(rs.reduce((a, b) => a + (b - m) ** 2, 0) / (rs.length - 1));
    }
    sd.push(s);
    const past = sd
      .slice(Math.max(0, i - 365), i)
      .filter((x): x is number => x !== null)
      .sort((a, b) => a - b);
    volr.push(past.length > 100 && s ? s / past[Math.floor(past.length / 2)]! : null);
    const rl: number[] = [];
    for (let j = i; j > 0 && dn[j]! > dn[i]! - 365; j--) if (dn[j]! - dn[j - 1]! === 1) rl.push(c[j]!.close / c[j - 1]!.close - 1);
    let sl: number | null = null;
    if (rl.length >= 240) {
      const m = rl.reduce((a, b) => a + b, 0) / rl.length;
      sl = Math.sqrt(rl.reduce((a, b) => a + (b - m) ** 2, 0) / (rl.length - 1));
    }
    volb.push(s && sl ? s / sl : null);
    const semi = (xs: number[]) => Math.sqrt(xs.reduce((a, b) => a + Math.min(b, 0) ** 2, 0) / xs.length);
    vold.push(rs.length >= 60 && rl.length >= 240 && semi(rl) > 0 ? semi(rs) / semi(rl) : null);
    let hi = -Infinity;
    for (let j = i; j >= 0 && dn[j]! > dn[i]! - H; j--) hi = Math.max(hi, c[j]!.close);
    dd.push(s && s > 0 ? Math.log(c[i]!.close / hi) / (s * Math.sqrt(H)) : null);
  }
  feats.set(asset, {
    date: c.map((x) => x.date),
    close: c.map((x) => x.close),
    score: series.map((s) => s.score),
    conf: series.map((s) => s.confidence),
    mom: series.map((s) => s.factors.find((f) => f.name === 'momentum')?.score ?? null),
    sd,
    dd,
    volr,
    volb,
    vold,
  });
}

interface Rule {
  bands: SignalModel['bands'];
  asymExit: boolean; // downgrades at once
  stopK: number | null; // cap buys at neutral while dd < -k
  momGate: boolean; // buys need own momentum > 0 (sells need < 0 when symGate)
  symGate: boolean;
  volGate: 'none' | 'a' | 'b' | 'd' | 'scale';
  volMax: number;
}
const rank: Record<SignalLevel, number> = { strong_sell: -2, sell: -1, neutral: 0, buy: 1, strong_buy: 2 };

function levels(f: Feat, r: Rule): SignalLevel[] {
  const m = { bands: r.bands, margin: 0.05 };
  let level: SignalLevel | null = null;
  let cand: SignalLevel | null = null;
  let run = 0;
  const out: SignalLevel[] = [];
  for (let i = 0; i < f.score.length; i++) {
    const score = f.score[i]!;
    const current: SignalLevel = level ?? signalLevel(score, r.bands);
    let p = levelWithHysteresis(score, current, m);
    if (rank[p] > 0) {
      if (r.stopK !== null && f.dd[i] !== null && f.dd[i]! < -r.stopK) p = 'neutral';
      if (r.momGate && !((f.mom[i] ?? 0) > 0)) p = 'neutral';
      if (r.volGate === 'a' && !((f.volr[i] ?? 9) <= 1)) p = 'neutral';
      if (r.volGate === 'd' && !((f.vold[i] ?? (process.env.NULLPASS ? 0 : 9)) <= r.volMax)) p = 'neutral';
      if (r.volGate === 'b' && !((f.volb[i] ?? (process.env.NULLPASS ? 0 : 9)) <= r.volMax)) p = 'neutral';
      if (r.volGate === 'scale') p = levelWithHysteresis(score / Math.max(1, f.volb[i] ?? 1), current, m);
    }
    if (rank[p] < 0 && r.symGate && !((f.mom[i] ?? 0) < 0)) p = 'neutral';
    level = current;
    if (p === current) {
      cand = null;
      run = 0;
    } else if (r.asymExit && rank[p] < rank[current] && rank[current] > 0) {
      // leaving a long level toward lower: at once
      level = p;
      cand = null;
      run = 0;
    } else if (r.asymExit && rank[p] > rank[current] && rank[current] < 0) {
      level = p;
      cand = null;
      run = 0;
    } else {
      if (p === cand) run++;
      else {
        cand = p;
        run = 1;
      }
      if (run >= 3) {
        level = p;
        cand = null;
        run = 0;
      }
    }
    out.push(current === level ? current : level);
  }
  return out;
}

const memo = new Map<string, Map<string, SignalDay[]>>();
function daysOf(r: Rule): Map<string, SignalDay[]> {
  const key = JSON.stringify(r);
  let hit = memo.get(key);
  if (hit) return hit;
  hit = new Map();
  for (const [asset, f] of feats) {
    const lv = levels(f, r);
    hit.set(
      asset,
      lv.map((signal, i) => ({ date: f.date[i]!, close: f.close[i]!, signal, score: f.score[i]!, confidence: f.conf[i]! })),
    );
  }
  memo.set(key, hit);
  return hit;
}

function walkForward(name: string, grid: Rule[], objective: 'ls' | 'lf'): void {
  const choices: { year: number; r: Rule }[] = [];
  for (let y = 2020; y <= Number(market.asOf.slice(0, 4)); y++) {
    const through = addDays(`${y}-01-01`, -31);
    let best = grid[0]!;
    let bo = -Infinity;
    for (const r of grid) {
      const pm = pooledMetrics([...daysOf(r).values()], '1970-01-01', through, COST);
      const o = (objective === 'lf' ? pm.long_flat.sharpe : pm.long_short.sharpe) ?? -Infinity;
      if (o > bo) [bo, best] = [o, r];
    }
    choices.push({ year: y, r: best });
  }
  const per = new Map(choices.map((c) => [c.year, daysOf(c.r)]));
  const first = choices[0]!.year;
  const last = choices.at(-1)!.year;
  const pool: SignalDay[][] = [];
  const assets: AssetWindowMetrics[] = [];
  for (const a of market.data.assets) {
    const seq = per.get(first)!.get(a.asset);
    if (!seq) continue;
    const d = seq.map((x, i) => per.get(Math.min(Math.max(Number(x.date.slice(0, 4)), first), last))!.get(a.asset)![i]!);
    const m = assetMetrics(d, '2020-01-01', market.asOf, COST);
    if (m.days === 0) continue;
    pool.push(d);
    assets.push({ asset: a.asset, symbol: a.symbol, ...m });
  }
  const pooled = pooledMetrics(pool, '2020-01-01', market.asOf, COST);
  const t = targets({
    model_version: name,
    mode: 'walk_forward',
    from: '2020-01-01',
    to: market.asOf,
    cost_bps: COST,
    bands: null,
    choices: [],
    pooled,
    assets,
  });
  const chosen = choices.map((c) => `${c.r.stopK ?? '–'}/${c.r.volMax}/${c.r.bands.buy}`).join(' ');
  if (process.env.DD)
    console.log(
      '   Sharpe LF/BH: ' +
        assets.map((a) => `${a.symbol}:${a.long_flat.sharpe?.toFixed(2)}/${a.buy_and_hold.sharpe?.toFixed(2)}`).join(' '),
    );
  const dd = assets.map((a) => `${a.symbol}:${Math.round((a.long_flat.max_drawdown / a.buy_and_hold.max_drawdown) * 100)}`).join(' ');
  console.log(`| ${name} (${objective}) | ${t.map((x) => x.value + (x.met ? '' : ' ✗')).join(' | ')} | ${chosen} |`);
  if (process.env.DD) console.log('   DD ratio %: ' + dd);
}

const variants = (process.argv[2] ?? 'v2').split(',');
const obj = (process.argv[3] ?? 'ls') as 'ls' | 'lf';
const ks = (process.env.KS ?? '0.5,1,1.5').split(',').map(Number);
for (const v of variants) {
  const asymExit = v.includes('asym');
  const momGate = v.includes('mom');
  const symGate = v.includes('sym2');
  const stop = v.includes('stop');
  const vms = v.includes('vmWF') ? (process.env.VMS ?? '1,1.25,1.5').split(',').map(Number) : [1];
  const grid: Rule[] = (stop ? ks : [null]).flatMap((k) =>
    vms.flatMap((volMax) =>
      (process.env.BANDS ? MODEL_V2_GRID.filter((b) => String(b.buy) === process.env.BANDS) : MODEL_V2_GRID).map((bands) => ({
        volMax,
        bands,
        asymExit,
        stopK: k,
        momGate,
        symGate,
        volGate: (v.includes('volA')
          ? 'a'
          : v.includes('volB')
            ? 'b'
            : v.includes('volD')
              ? 'd'
              : v.includes('volS')
                ? 'scale'
                : 'none') as Rule['volGate'],
      })),
    ),
  );
  walkForward(v, grid, obj);
}

if (process.env.DIAG) {
  // 30-day up-rate by condition, pooled asset-days 2020-01-01 .. end (in-sample diagnostic only).
  const rows: { up: boolean; score: number; mom: number | null; dd: number | null; volr: number | null; conf: number }[] = [];
  for (const f of feats.values()) {
    for (let i = 0; i < f.date.length; i++) {
      if (f.date[i]! < '2020-01-01') continue;
      const j = f.date.indexOf(addDays(f.date[i]!, 30), i);
      if (j < 0) continue;
      // vol ratio: sd now vs median sd of the past 365 days
      const past = f.sd
        .slice(Math.max(0, i - 365), i)
        .filter((x): x is number => x !== null)
        .sort((a, b) => a - b);
      const volr = past.length > 100 && f.sd[i] ? f.sd[i]! / past[Math.floor(past.length / 2)]! : null;
      rows.push({ up: f.close[j]! > f.close[i]!, score: f.score[i]!, mom: f.mom[i] ?? null, dd: f.dd[i] ?? null, volr, conf: f.conf[i]! });
    }
  }
  const baseRate = rows.filter((r) => r.up).length / rows.length;
  const show = (label: string, p: (r: (typeof rows)[number]) => boolean) => {
    const s = rows.filter(p);
    console.log(`${label}: n=${s.length} edge=${((s.filter((r) => r.up).length / s.length - baseRate) * 100).toFixed(1)}`);
  };
  show('score>0.25', (r) => r.score > 0.25);
  show('score>0.4', (r) => r.score > 0.4);
  show('score>0.5', (r) => r.score > 0.5);
  show('score>0.25 & mom>0', (r) => r.score > 0.25 && (r.mom ?? 0) > 0);
  show('score>0.25 & mom>0.3', (r) => r.score > 0.25 && (r.mom ?? 0) > 0.3);
  show('score>0.25 & volr<1', (r) => r.score > 0.25 && (r.volr ?? 9) < 1);
  show('score>0.25 & volr>=1', (r) => r.score > 0.25 && (r.volr ?? 0) >= 1);
  show('score>0.25 & volr<1.25', (r) => r.score > 0.25 && (r.volr ?? 9) < 1.25);
  show('score>0.25 & dd>-0.5', (r) => r.score > 0.25 && (r.dd ?? -9) > -0.5);
  show('score>0.25 & dd<=-0.5', (r) => r.score > 0.25 && (r.dd ?? 0) <= -0.5);
  show('score>0.25 & conf>0.6', (r) => r.score > 0.25 && r.conf > 0.6);
  show('score>0.25 & conf>0.75', (r) => r.score > 0.25 && r.conf > 0.75);
  show('mom>0', (r) => (r.mom ?? 0) > 0);
  show('volr<1', (r) => (r.volr ?? 9) < 1);
}
