// src/engine/indicators.ts
import { EMA, RSI, SMA } from "trading-signals";

// src/engine/util.ts
var DAY_MS = 864e5;
function dayNumber(day) {
  if (day.length !== 10 || day.charCodeAt(4) !== 45 || day.charCodeAt(7) !== 45) throw new RangeError(`invalid day '${day}' (expected YYYY-MM-DD)`);
  const y0 = digits(day, 0, 4);
  const m = digits(day, 5, 7);
  const d = digits(day, 8, 10);
  if (y0 < 0 || m < 1 || m > 12 || d < 1 || d > daysInMonth(y0, m)) throw new RangeError(`invalid day '${day}' (expected YYYY-MM-DD)`);
  const y = m <= 2 ? y0 - 1 : y0;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const doy = Math.floor((153 * (m + (m > 2 ? -3 : 9)) + 2) / 5) + d - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146097 + doe - 719468;
}
function digits(s, from, to) {
  let n = 0;
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i) - 48;
    if (c < 0 || c > 9) return -1;
    n = n * 10 + c;
  }
  return n;
}
function daysInMonth(y, m) {
  if (m === 2) return y % 4 === 0 && y % 100 !== 0 || y % 400 === 0 ? 29 : 28;
  return m === 4 || m === 6 || m === 9 || m === 11 ? 30 : 31;
}
function dayString(n) {
  return new Date(n * DAY_MS).toISOString().slice(0, 10);
}
function addDays(day, days) {
  return dayString(dayNumber(day) + days);
}
function round(x, digits2) {
  const f = 10 ** digits2;
  const r = Math.round(x * f) / f;
  return Object.is(r, -0) ? 0 : r;
}
function clamp(x, lo, hi) {
  return x < lo ? lo : x > hi ? hi : x;
}
function assertAscending(items, what) {
  for (let i = 1; i < items.length; i++) {
    if (!(items[i - 1].date < items[i].date)) {
      throw new RangeError(`${what}: dates must be strictly ascending (${items[i - 1].date} then ${items[i].date})`);
    }
  }
}
function normalizeWeights(weights, digits2) {
  const total = weights.reduce((a, b) => a + b, 0);
  if (!(total > 0) || weights.some((w) => w < 0)) throw new RangeError("weights must be non-negative with a positive sum");
  const unit = 10 ** digits2;
  const exact = weights.map((w) => w / total * unit);
  const floors = exact.map((x) => Math.floor(x + 1e-9));
  let left = unit - floors.reduce((a, b) => a + b, 0);
  const order = exact.map((x, i) => ({ i, rem: x - floors[i] })).sort((a, b) => b.rem - a.rem || a.i - b.i);
  for (const o of order) {
    if (left <= 0) break;
    floors[o.i]++;
    left--;
  }
  return floors.map((f) => f / unit);
}

// src/engine/indicators.ts
function checkInputs(values, period, name) {
  if (!Number.isInteger(period) || period < 1) throw new RangeError(`${name}: period must be a positive integer, got ${period}`);
  for (let i = 0; i < values.length; i++) {
    if (!Number.isFinite(values[i])) throw new RangeError(`${name}: value at index ${i} is not a finite number`);
  }
}
function rsiWilder(closes, period = 14) {
  checkInputs(closes, period, "rsiWilder");
  const ind = new RSI(period);
  return closes.map((c) => ind.add(c));
}
function sma(values, period) {
  checkInputs(values, period, "sma");
  const ind = new SMA(period);
  return values.map((v) => ind.add(v));
}
function returnOverCalendarDays(candles, days) {
  const closes = candles.map((c) => c.close);
  checkInputs(closes, days, "returnOverCalendarDays");
  const dn = candles.map((c) => dayNumber(c.date));
  return candles.map((_, i) => {
    const target = dn[i] - days;
    if (i >= days && dn[i - days] === target) {
      const base = closes[i - days];
      return base === 0 ? null : (closes[i] / base - 1) * 100;
    }
    for (let j = i - 1; j >= 0 && dn[j] >= target; j--) {
      if (dn[j] === target) return closes[j] === 0 ? null : (closes[i] / closes[j] - 1) * 100;
    }
    return null;
  });
}

// src/engine/regime.ts
var RSI_PERIOD = 14;
var RSI_OVERSOLD = 30;
var RSI_OVERBOUGHT = 70;
var SMA_LONG = 200;
var MOMENTUM_DAYS = 30;
var FUNDING_NEUTRAL_MAX = 1e-4;
var FUNDING_ELEVATED_MAX = 3e-4;
var REGIME_STALENESS_DAYS = 3;
var REGIME_BULL_MIN = 0.2;
var REGIME_BEAR_MAX = -0.2;
var REGIME_CONFIRM_DAYS = 3;
var REGIME_WEIGHTS = {
  sma_200: 0.3,
  return_30d: 0.2,
  rsi: 0.15,
  fear_greed: 0.2,
  funding_rate: 0.15
};
function fundingState(rate) {
  if (rate < 0) return "negative";
  if (rate <= FUNDING_NEUTRAL_MAX) return "neutral";
  if (rate <= FUNDING_ELEVATED_MAX) return "elevated";
  return "extreme";
}
function rsiState(rsi) {
  return rsi < RSI_OVERSOLD ? "oversold" : rsi > RSI_OVERBOUGHT ? "overbought" : "neutral";
}
function momentumState(return30dPct, priceVsSma200Pct) {
  if (return30dPct > 0 && priceVsSma200Pct > 0) return "positive";
  if (return30dPct < 0 && priceVsSma200Pct < 0) return "negative";
  return "neutral";
}
function regimeClass(score) {
  return score >= REGIME_BULL_MIN ? "bull" : score <= REGIME_BEAR_MAX ? "bear" : "neutral";
}
var FUNDING_STATE_SCORE = { negative: -1, neutral: 0, elevated: 0.5, extreme: 1 };
function computeRegimeSeries(input) {
  const { btc: btc2, fearGreed, funding } = input;
  assertAscending(btc2, "btc candles");
  assertAscending(fearGreed, "fear & greed");
  assertAscending(funding, "funding");
  const closes = btc2.map((c) => c.close);
  const rsi = rsiWilder(closes, RSI_PERIOD);
  const sma200 = sma(closes, SMA_LONG);
  const ret30 = returnOverCalendarDays(btc2, MOMENTUM_DAYS);
  const out = [];
  let fg2 = -1;
  let fu = -1;
  let regime = "neutral";
  let since = "";
  let candidate = null;
  let run = 0;
  for (let i = 0; i < btc2.length; i++) {
    const c = btc2[i];
    const d = c.date;
    const dn = dayNumber(d);
    while (fg2 + 1 < fearGreed.length && fearGreed[fg2 + 1].date <= d) fg2++;
    while (fu + 1 < funding.length && funding[fu + 1].date <= d) fu++;
    const conditions = { rsi: null, fear_greed: null, momentum: null, funding_rate: null };
    let wsum = 0;
    let ssum = 0;
    const add = (w, s) => {
      wsum += w;
      ssum += w * s;
    };
    const r = rsi[i];
    if (r !== null && r !== void 0) {
      conditions.rsi = { value: round(r, 2), period: RSI_PERIOD, state: rsiState(r), as_of: d };
      add(REGIME_WEIGHTS.rsi, clamp((r - 50) / 20, -1, 1));
    }
    const s200 = sma200[i];
    const r30 = ret30[i];
    if (s200 !== null && s200 !== void 0 && r30 !== null && r30 !== void 0 && s200 > 0) {
      const vs = (c.close / s200 - 1) * 100;
      conditions.momentum = {
        return_30d_pct: round(r30, 2),
        price_vs_sma_200_pct: round(vs, 2),
        state: momentumState(r30, vs),
        as_of: d
      };
      add(REGIME_WEIGHTS.sma_200, Math.tanh(vs / 20));
      add(REGIME_WEIGHTS.return_30d, Math.tanh(r30 / 15));
    }
    const f = fg2 >= 0 ? fearGreed[fg2] : null;
    if (f && dn - dayNumber(f.date) <= REGIME_STALENESS_DAYS) {
      conditions.fear_greed = { value: f.value, classification: f.classification, as_of: f.date };
      add(REGIME_WEIGHTS.fear_greed, clamp((f.value - 50) / 50, -1, 1));
    }
    const fr = fu >= 0 ? funding[fu] : null;
    if (fr && dn - dayNumber(fr.date) <= REGIME_STALENESS_DAYS) {
      const state = fundingState(fr.rate);
      conditions.funding_rate = {
        value: fr.rate,
        annualized_pct: round(fr.rate * 3 * 365 * 100, 2),
        state,
        as_of: fr.date
      };
      add(REGIME_WEIGHTS.funding_rate, FUNDING_STATE_SCORE[state]);
    }
    const score = wsum > 0 ? round(ssum / wsum, 4) : 0;
    const raw = regimeClass(score);
    if (i === 0) {
      regime = raw;
      since = d;
    } else if (raw === regime) {
      candidate = null;
      run = 0;
    } else {
      if (raw === candidate) run++;
      else {
        candidate = raw;
        run = 1;
      }
      if (run >= REGIME_CONFIRM_DAYS) {
        regime = raw;
        since = d;
        candidate = null;
        run = 0;
      }
    }
    const coverage = wsum;
    const support = regime === "bull" ? clamp(score / 0.5, 0, 1) : regime === "bear" ? clamp(-score / 0.5, 0, 1) : clamp(1 - Math.abs(score) / 0.4, 0, 1);
    out.push({ regime, score, confidence: round(coverage * support, 4), since, as_of: d, conditions });
  }
  return out;
}
function regimeAt(series, date) {
  let lo = 0;
  let hi = series.length - 1;
  let ans = null;
  while (lo <= hi) {
    const mid = lo + hi >> 1;
    const r = series[mid];
    if (r.as_of <= date) {
      ans = r;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return ans;
}

// src/engine/chain-health.ts
var CHAIN_HEALTH_METRICS = {
  eth: [
    { metric: "tvl", weight: 0.3 },
    { metric: "transactions", weight: 0.2 },
    { metric: "active_addresses", weight: 0.2 },
    { metric: "fees_usd_etherscan_derived", weight: 0.2 },
    { metric: "gas_used", weight: 0.1 }
  ],
  sol: [
    { metric: "tvl", weight: 0.6 },
    { metric: "transactions", weight: 0.4 }
  ],
  hype: [
    { metric: "tvl_protocol_defillama", weight: 0.3 },
    { metric: "dex_volume", weight: 0.25 },
    { metric: "active_addresses", weight: 0.2 },
    { metric: "fees", weight: 0.15 },
    { metric: "net_inflow_usd", weight: 0.1 }
  ]
};
var RECENT_DAYS = 7;
var MIN_RECENT_OBS = 4;
var BASELINE_DAYS = 90;
var MIN_BASELINE_OBS = 60;
var CHAIN_STALENESS_DAYS = 14;
var Z_CLIP = 3;
var REGIME_SENSITIVITY = { bull: 0.8, neutral: 1, bear: 1.25 };
function chainStatus(score) {
  if (score >= 75) return "strong";
  if (score >= 60) return "healthy";
  if (score >= 40) return "neutral";
  if (score >= 25) return "weak";
  return "critical";
}
function healthScore(z, sensitivity) {
  return round(50 + 50 * Math.tanh(sensitivity * z / 2), 2);
}
var MetricModel = class {
  constructor(metric, pts) {
    this.metric = metric;
    this.pts = pts;
    assertAscending(pts, `metric ${metric}`);
    this.dn = pts.map((p, i) => {
      if (!Number.isFinite(p.value)) throw new RangeError(`metric ${metric}: value at index ${i} (${p.date}) is not finite`);
      return dayNumber(p.date);
    });
    this.mean7 = new Array(pts.length);
    this.cnt7 = new Array(pts.length);
    let lo = 0;
    for (let k = 0; k < pts.length; k++) {
      while (this.dn[lo] < this.dn[k] - (RECENT_DAYS - 1)) lo++;
      let s = 0;
      for (let m = lo; m <= k; m++) s += pts[m].value;
      this.cnt7[k] = k - lo + 1;
      this.mean7[k] = s / (k - lo + 1);
    }
  }
  dn;
  mean7;
  cnt7;
  memo = /* @__PURE__ */ new Map();
  /** z of the 7-day mean ending at point k against the prior 90 days' 7-day means. */
  evalAt(k) {
    const hit = this.memo.get(k);
    if (hit) return hit;
    let res;
    if (this.cnt7[k] < MIN_RECENT_OBS) {
      res = { ok: false, reason: `only ${this.cnt7[k]} of ${RECENT_DAYS} days have a value in the recent window (need ${MIN_RECENT_OBS})` };
    } else {
      const end = this.dn[k] - RECENT_DAYS;
      const start = end - (BASELINE_DAYS - 1);
      const xs = [];
      for (let m = k - 1; m >= 0 && this.dn[m] >= start; m--) {
        if (this.dn[m] <= end && this.cnt7[m] >= MIN_RECENT_OBS) xs.push(this.mean7[m]);
      }
      if (xs.length < MIN_BASELINE_OBS) {
        res = { ok: false, reason: `only ${xs.length} of ${BASELINE_DAYS} baseline days have a 7-day mean (need ${MIN_BASELINE_OBS})` };
      } else {
        const mu = xs.reduce((a, b) => a + b, 0) / xs.length;
        const sd = Math.sqrt(xs.reduce((a, b) => a + (b - mu) ** 2, 0) / (xs.length - 1));
        const recent = this.mean7[k];
        const zRaw = sd > 0 ? (recent - mu) / sd : recent === mu ? 0 : Math.sign(recent - mu) * Z_CLIP;
        res = { ok: true, recent, z: clamp(zRaw, -Z_CLIP, Z_CLIP), as_of: this.pts[k].date };
      }
    }
    this.memo.set(k, res);
    return res;
  }
};
function computeChainHealthSeries(input) {
  const { chain, metrics, regimeByDate, dates } = input;
  const spec = CHAIN_HEALTH_METRICS[chain];
  if (!spec) throw new RangeError(`unknown chain '${chain}'`);
  assertAscending(
    dates.map((date) => ({ date })),
    "chain health dates"
  );
  const models = spec.map((s) => {
    const pts = metrics[s.metric];
    return { ...s, model: pts ? new MetricModel(s.metric, pts) : null, ptr: -1 };
  });
  const out = [];
  for (const d of dates) {
    const dn = dayNumber(d);
    const avail = [];
    const missing = [];
    for (const m of models) {
      if (!m.model) {
        missing.push({ metric: m.metric, last_date: null, reason: "metric not provided" });
        continue;
      }
      const pts = m.model.pts;
      while (m.ptr + 1 < pts.length && pts[m.ptr + 1].date <= d) m.ptr++;
      if (m.ptr < 0) {
        missing.push({ metric: m.metric, last_date: null, reason: `no value on or before ${d}` });
        continue;
      }
      const last = pts[m.ptr].date;
      const age = dn - m.model.dn[m.ptr];
      if (age > CHAIN_STALENESS_DAYS) {
        missing.push({ metric: m.metric, last_date: last, reason: `stale: newest value is ${age} days old (limit ${CHAIN_STALENESS_DAYS})` });
        continue;
      }
      const ev = m.model.evalAt(m.ptr);
      if (!ev.ok) {
        missing.push({ metric: m.metric, last_date: last, reason: ev.reason });
        continue;
      }
      avail.push({ metric: m.metric, weight: m.weight, recent: ev.recent, z: ev.z, as_of: ev.as_of });
    }
    const regime = regimeByDate(d);
    const sensitivity = REGIME_SENSITIVITY[regime];
    if (avail.length === 0) {
      out.push({
        chain,
        score: null,
        status: "insufficient_data",
        z_score: null,
        regime,
        sensitivity,
        components: [],
        missing_metrics: missing,
        window_days: BASELINE_DAYS,
        as_of: null,
        date: d
      });
      continue;
    }
    const weights = normalizeWeights(avail.map((x) => x.weight), 4);
    const components = avail.map((x, i) => {
      const weight = weights[i];
      const z = round(x.z, 4);
      return { metric: x.metric, value: round(x.recent, 2), z_score: z, weight, contribution: round(weight * z, 4), as_of: x.as_of };
    });
    const zc = round(
      components.reduce((a, c) => a + c.contribution, 0),
      4
    );
    const score = healthScore(zc, sensitivity);
    const asOf = avail.reduce((a, x) => x.as_of > a ? x.as_of : a, avail[0].as_of);
    out.push({
      chain,
      score,
      status: chainStatus(score),
      z_score: zc,
      regime,
      sensitivity,
      components,
      missing_metrics: missing,
      window_days: BASELINE_DAYS,
      as_of: asOf,
      date: d
    });
  }
  return out;
}

// src/engine/signal.ts
var SIGNAL_WEIGHTS = {
  trend: 0.25,
  momentum: 0.2,
  rsi: 0.15,
  fear_greed: 0.1,
  funding_rate: 0.1,
  chain_health: 0.1,
  regime: 0.1
};
var FACTOR_ORDER = ["trend", "momentum", "rsi", "fear_greed", "funding_rate", "chain_health", "regime"];
var SMA_SHORT = 50;
var VOL_WINDOW_DAYS = 90;
var VOL_MIN_RETURNS = 60;
var SIGNAL_STALENESS_DAYS = 3;
var FUNDING_BASELINE = 1e-4;
var FUNDING_SCALE = 4e-4;
function signalLevel(score) {
  if (score > 0.5) return "strong_buy";
  if (score > 0.1) return "buy";
  if (score >= -0.1) return "neutral";
  if (score >= -0.5) return "sell";
  return "strong_sell";
}
var factorScores = {
  /** Price vs SMA-50 (%) and SMA-200 (%): 0.5*tanh(p50/10) + 0.5*tanh(p200/20). */
  trend: (p50, p200) => 0.5 * Math.tanh(p50 / 10) + 0.5 * Math.tanh(p200 / 20),
  /** 30-day return (%) over 30-day volatility (%): tanh(z / 2). */
  momentum: (ret30, vol30) => vol30 > 0 ? Math.tanh(ret30 / vol30 / 2) : 0,
  /** Mean reversion: (50 - RSI) / 30, clipped (RSI 20 -> +1, 80 -> -1). */
  rsi: (rsi) => clamp((50 - rsi) / 30, -1, 1),
  /** Contrarian: (50 - F&G) / 50 (extreme fear bullish). */
  fear_greed: (v) => clamp((50 - v) / 50, -1, 1),
  /** Contrarian: (0.0001 - rate) / 0.0004, clipped (crowded longs bearish). */
  funding_rate: (rate) => clamp((FUNDING_BASELINE - rate) / FUNDING_SCALE, -1, 1),
  /** (score - 50) / 50. */
  chain_health: (score) => clamp((score - 50) / 50, -1, 1),
  /** The BTC regime's raw score, as is. */
  regime: (score) => clamp(score, -1, 1)
};
function fmt(x, d = 2) {
  const f = d === 2 ? 100 : d === 4 ? 1e4 : 10 ** d;
  const n = Math.round(Math.abs(x) * f);
  if (!Number.isSafeInteger(n)) return x.toFixed(d);
  let digits2 = String(n);
  if (digits2.length <= d) digits2 = "0".repeat(d - digits2.length + 1) + digits2;
  const int = digits2.slice(0, digits2.length - d);
  let grouped = int;
  if (int.length > 3) {
    grouped = "";
    for (let i = 0; i < int.length; i++) {
      if (i > 0 && (int.length - i) % 3 === 0) grouped += ",";
      grouped += int[i];
    }
  }
  return (x < 0 && n !== 0 ? "-" : "") + grouped + (d > 0 ? "." + digits2.slice(digits2.length - d) : "");
}
var pct = (x) => `${x >= 0 ? "+" : ""}${fmt(x)}%`;
function factorRawScore(name, x) {
  switch (name) {
    case "trend":
      return x.sma50 !== null && x.sma200 !== null && x.sma50 > 0 && x.sma200 > 0 ? factorScores.trend((x.close / x.sma50 - 1) * 100, (x.close / x.sma200 - 1) * 100) : null;
    case "momentum":
      return x.ret30 !== null && x.vol30 !== null && x.vol30 > 0 ? factorScores.momentum(x.ret30, x.vol30) : null;
    case "rsi":
      return x.rsi !== null ? factorScores.rsi(x.rsi) : null;
    case "fear_greed":
      return x.fg && x.fgFresh ? factorScores.fear_greed(x.fg.value) : null;
    case "funding_rate":
      return x.fr && x.frFresh ? factorScores.funding_rate(x.fr.rate) : null;
    case "chain_health":
      return x.h && x.hFresh && x.h.score !== null ? factorScores.chain_health(x.h.score) : null;
    case "regime":
      return x.rg && x.rgFresh ? factorScores.regime(x.rg.score) : null;
  }
}
function describeFactor(name, x, score, weight, contribution, sc) {
  const ss = fmt(score, 4);
  switch (name) {
    case "trend": {
      const p50 = (x.close / x.sma50 - 1) * 100;
      const p200 = (x.close / x.sma200 - 1) * 100;
      return {
        name,
        value: round(p200, 2),
        unit: "% vs SMA-200",
        score,
        weight,
        contribution,
        explanation: `Close ${fmt(x.close)} is ${pct(p50)} vs its 50-day SMA (${fmt(x.sma50)}) and ${pct(p200)} vs its 200-day SMA (${fmt(x.sma200)}), trend score ${ss}.`,
        source: sc.src.trend,
        as_of: x.date
      };
    }
    case "momentum":
      return {
        name,
        value: round(x.ret30, 2),
        unit: "% over 30 days",
        score,
        weight,
        contribution,
        explanation: `30-day return ${pct(x.ret30)} against a 30-day volatility of ${fmt(x.vol30)}% (${fmt(x.ret30 / x.vol30)} sigma), momentum score ${ss}.`,
        source: sc.src.momentum,
        as_of: x.date
      };
    case "rsi": {
      const rv = x.rsi;
      return {
        name,
        value: round(rv, 2),
        unit: "RSI-14 (0..100)",
        score,
        weight,
        contribution,
        explanation: `RSI-14 is ${fmt(rv)} (${rv < 30 ? "oversold" : rv > 70 ? "overbought" : "neutral band 30-70"}); read as mean reversion, score ${ss}.`,
        source: sc.src.rsi,
        as_of: x.date
      };
    }
    case "fear_greed": {
      const fg2 = x.fg;
      return {
        name,
        value: fg2.value,
        unit: "index 0..100",
        score,
        weight,
        contribution,
        explanation: `Crypto Fear & Greed is ${fg2.value} (${fg2.classification}) on ${fg2.date}; read contrarian, score ${ss}.`,
        source: sc.src.fear_greed,
        as_of: fg2.date
      };
    }
    case "funding_rate": {
      const fr = x.fr;
      return {
        name,
        value: fr.rate,
        unit: "fraction per 8 h",
        score,
        weight,
        contribution,
        explanation: `Perpetual funding averaged ${fmt(fr.rate * 100, 4)}% per 8 h on ${fr.date} (${fmt(fr.rate * 3 * 365 * 100)}% annualized, ${fundingState(fr.rate)}); read contrarian against the 0.01% default, score ${ss}.`,
        source: sc.src.funding_rate,
        as_of: fr.date
      };
    }
    case "chain_health": {
      const h = x.h;
      return {
        name,
        value: h.score,
        unit: "score 0..100",
        score,
        weight,
        contribution,
        explanation: `Chain health of ${h.chain} is ${fmt(h.score, 1)}/100 (${h.status}, composite z ${fmt(h.z_score ?? 0)}, metrics as of ${h.as_of}), score ${ss}.`,
        source: sc.src.chain_health,
        as_of: h.as_of ?? h.date
      };
    }
    case "regime": {
      const rg = x.rg;
      return {
        name,
        value: rg.score,
        unit: "score -1..1",
        score,
        weight,
        contribution,
        explanation: `BTC regime is ${rg.regime} since ${rg.since} with raw score ${fmt(rg.score, 4)} on ${rg.as_of}, score ${ss}.`,
        source: sc.src.regime,
        as_of: rg.as_of
      };
    }
  }
}
function missingReason(name, x, sc) {
  const d = x.date;
  const stale = (what, from) => `newest ${what} is from ${from}, more than ${SIGNAL_STALENESS_DAYS} days before ${d}`;
  switch (name) {
    case "trend":
      return `needs ${SMA_LONG} daily closes for the 200-day SMA, ${x.i + 1} available`;
    case "momentum":
      return x.ret30 === null ? `no close dated ${addDays(d, -MOMENTUM_DAYS)} (30 days before ${d})` : `needs ${VOL_MIN_RETURNS} daily returns in the last ${VOL_WINDOW_DAYS} days for volatility, ${x.volN} available`;
    case "rsi":
      return `needs ${RSI_PERIOD + 1} daily closes, ${x.i + 1} available`;
    case "fear_greed":
      return x.fg ? `${stale("Fear & Greed value", x.fg.date)} (upstream gap)` : `no Fear & Greed value on or before ${d}`;
    case "funding_rate":
      if (!sc.hasFunding) return `no funding-rate history for ${sc.asset}`;
      return x.fr ? stale("funding rate", x.fr.date) : `funding history of ${sc.asset} starts ${sc.fundingFirst}, after ${d}`;
    case "chain_health":
      if (x.h && x.hFresh) {
        const why = x.h.missing_metrics.map((m) => `${m.metric}: ${m.reason}`).join("; ");
        return `chain health of ${x.h.chain} has insufficient data on ${x.h.date} (${why})`;
      }
      return x.h ? stale("chain health", x.h.date) : `no chain health on or before ${d}`;
    case "regime":
      return x.rg ? stale("BTC regime", x.rg.as_of) : `no BTC regime on or before ${d}`;
  }
}
function computeSignalSeries(input) {
  const { asset, candles, fearGreed, regime, chainHealth, sources } = input;
  const funding = input.funding;
  assertAscending(candles, `${asset} candles`);
  assertAscending(fearGreed, "fear & greed");
  if (funding) assertAscending(funding, `${asset} funding`);
  for (let k = 1; k < regime.length; k++) {
    if (!(regime[k - 1].as_of < regime[k].as_of)) throw new RangeError("regime series: as_of must be strictly ascending");
  }
  if (chainHealth) assertAscending(chainHealth, "chain health series");
  const closes = candles.map((c) => c.close);
  const dn = candles.map((c) => dayNumber(c.date));
  const sma50 = sma(closes, SMA_SHORT);
  const sma200 = sma(closes, SMA_LONG);
  const rsi = rsiWilder(closes, RSI_PERIOD);
  const ret30 = returnOverCalendarDays(candles, MOMENTUM_DAYS);
  const fgDn = fearGreed.map((p) => dayNumber(p.date));
  const frDn = funding ? funding.map((p) => dayNumber(p.date)) : [];
  const rgDn = regime.map((r) => dayNumber(r.as_of));
  const chDn = chainHealth ? chainHealth.map((r) => dayNumber(r.date)) : [];
  const dailyRet = candles.map(
    (c, i) => i > 0 && dn[i] - dn[i - 1] === 1 && closes[i - 1] !== 0 ? (c.close / closes[i - 1] - 1) * 100 : null
  );
  let volLo = 0;
  let volN = 0;
  let volS = 0;
  let volS2 = 0;
  const applicable = FACTOR_ORDER.filter((f) => f !== "chain_health" || chainHealth !== null);
  const applicableWeight = applicable.reduce((a, f) => a + SIGNAL_WEIGHTS[f], 0);
  const sc = {
    asset,
    sources,
    src: {
      trend: `${sources.prices}; SMA-50 and SMA-200 of daily closes`,
      momentum: `${sources.prices}; 30-day close-to-close return over realized volatility of daily returns (last ${VOL_WINDOW_DAYS} days) x sqrt(30)`,
      rsi: `${sources.prices}; Wilder RSI-14 of daily closes`,
      fear_greed: `${sources.fear_greed}; contrarian (50 - value) / 50`,
      funding_rate: `${sources.funding ?? "funding"}; contrarian (0.0001 - rate) / 0.0004`,
      chain_health: `${sources.chain_health ?? "chain health"}; (score - 50) / 50`,
      regime: "BTC market regime (price vs SMA-200, 30-day return, RSI-14, Fear & Greed, funding; see /regime)"
    },
    hasFunding: !!funding && funding.length > 0,
    fundingFirst: funding?.[0]?.date ?? null
  };
  const weightMemo = /* @__PURE__ */ new Map();
  let fg2 = -1;
  let fr = -1;
  let rg = -1;
  let ch = -1;
  const out = [];
  for (let i = 0; i < candles.length; i++) {
    const c = candles[i];
    const today = dn[i];
    const r = dailyRet[i];
    if (r !== null && r !== void 0) {
      volN++;
      volS += r;
      volS2 += r * r;
    }
    while (dn[volLo] <= today - VOL_WINDOW_DAYS) {
      const x2 = dailyRet[volLo];
      if (x2 !== null && x2 !== void 0) {
        volN--;
        volS -= x2;
        volS2 -= x2 * x2;
      }
      volLo++;
    }
    while (fg2 + 1 < fgDn.length && fgDn[fg2 + 1] <= today) fg2++;
    while (fr + 1 < frDn.length && frDn[fr + 1] <= today) fr++;
    while (rg + 1 < rgDn.length && rgDn[rg + 1] <= today) rg++;
    while (ch + 1 < chDn.length && chDn[ch + 1] <= today) ch++;
    const x = {
      i,
      date: c.date,
      close: c.close,
      sma50: sma50[i] ?? null,
      sma200: sma200[i] ?? null,
      rsi: rsi[i] ?? null,
      ret30: ret30[i] ?? null,
      vol30: volN >= VOL_MIN_RETURNS ? Math.sqrt(Math.max(0, (volS2 - volS * volS / volN) / (volN - 1))) * Math.sqrt(MOMENTUM_DAYS) : null,
      volN,
      fg: fg2 >= 0 ? fearGreed[fg2] : null,
      fgFresh: fg2 >= 0 && today - fgDn[fg2] <= SIGNAL_STALENESS_DAYS,
      fr: fr >= 0 ? funding[fr] : null,
      frFresh: fr >= 0 && today - frDn[fr] <= SIGNAL_STALENESS_DAYS,
      rg: rg >= 0 ? regime[rg] : null,
      rgFresh: rg >= 0 && today - rgDn[rg] <= SIGNAL_STALENESS_DAYS,
      h: ch >= 0 ? chainHealth[ch] : null,
      hFresh: ch >= 0 && today - chDn[ch] <= SIGNAL_STALENESS_DAYS
    };
    const names = [];
    const scores = [];
    let mask = 0;
    for (let k = 0; k < applicable.length; k++) {
      const name = applicable[k];
      const s = factorRawScore(name, x);
      if (s === null) continue;
      names.push(name);
      scores.push(round(s, 4));
      mask |= 1 << k;
    }
    let weights = weightMemo.get(mask);
    if (!weights) {
      weights = names.length > 0 ? normalizeWeights(names.map((n) => SIGNAL_WEIGHTS[n]), 4) : [];
      weightMemo.set(mask, weights);
    }
    const w = weights;
    const contributions = scores.map((s, k) => round(w[k] * s, 4));
    let sum = 0;
    let absSum = 0;
    let baseW = 0;
    for (let k = 0; k < names.length; k++) {
      sum += contributions[k];
      absSum += w[k] * Math.abs(scores[k]);
      baseW += SIGNAL_WEIGHTS[names[k]];
    }
    const score = round(sum, 4);
    let ws = 0;
    for (let k = 0; k < names.length; k++) ws += w[k] * scores[k];
    const agreement = absSum > 0 ? Math.min(1, Math.abs(ws) / absSum) : 0;
    const coverage = clamp(baseW / applicableWeight, 0, 1);
    const factors = new Array(names.length);
    for (let k = 0; k < names.length; k++) factors[k] = describeFactor(names[k], x, scores[k], w[k], contributions[k], sc);
    const missing = [];
    if (names.length < applicable.length) {
      for (const name of applicable) if (!names.includes(name)) missing.push({ name, reason: missingReason(name, x, sc) });
    }
    const result = {
      signal: signalLevel(score),
      score,
      confidence: round(coverage * agreement, 4),
      factors,
      missing_factors: missing,
      as_of: c.date
    };
    out.push(result);
  }
  return out;
}

// test/engine/real-data.ts
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
var DATA_DIR = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "data");
function readCsv(rel) {
  const lines = readFileSync(join(DATA_DIR, rel), "utf8").split(/\r?\n/).filter((l) => l.length > 0);
  const header = lines[0].split(",");
  return lines.slice(1).map((l) => {
    const cells = l.split(",");
    const rec = {};
    header.forEach((h, i) => rec[h] = cells[i] ?? "");
    return rec;
  });
}
function loadCandles(file) {
  return readCsv(`prices/${file}.csv`).map((r) => ({
    date: r.date,
    open: Number(r.open),
    high: Number(r.high),
    low: Number(r.low),
    close: Number(r.close),
    volume: r.volume ? Number(r.volume) : null
  }));
}
function loadFearGreed() {
  return readCsv("fear_greed.csv").map((r) => ({ date: r.date, value: Number(r.value), classification: r.classification }));
}
function loadFunding(file) {
  return readCsv(`funding/${file}.csv`).filter((r) => r.funding_rate_mean !== "").map((r) => ({ date: r.date, rate: Number(r.funding_rate_mean) }));
}
function loadChain(file) {
  const rows = readCsv(`chains/${file}.csv`);
  const out = {};
  for (const r of rows) {
    for (const [k, v] of Object.entries(r)) {
      if (k === "date" || v === "") continue;
      (out[k] ??= []).push({ date: r.date, value: Number(v) });
    }
  }
  return out;
}
var ASSETS = [
  { asset: "bitcoin", file: "btc", funding: "btc_daily", chain: null },
  { asset: "ethereum", file: "eth", funding: "eth_daily", chain: { id: "eth", file: "ethereum" } },
  { asset: "solana", file: "sol", funding: "sol_daily", chain: { id: "sol", file: "solana" } },
  { asset: "hyperliquid", file: "hype", funding: null, chain: { id: "hype", file: "hyperliquid" } },
  { asset: "binancecoin", file: "bnb", funding: null, chain: null },
  { asset: "ripple", file: "xrp", funding: null, chain: null },
  { asset: "dogecoin", file: "doge", funding: null, chain: null },
  { asset: "cardano", file: "ada", funding: null, chain: null },
  { asset: "avalanche-2", file: "avax", funding: null, chain: null },
  { asset: "chainlink", file: "link", funding: null, chain: null },
  { asset: "litecoin", file: "ltc", funding: null, chain: null }
];

// test/engine/_prof.ts
var fg = loadFearGreed();
var data = ASSETS.map((a) => ({ a, candles: loadCandles(a.file), fund: a.funding ? loadFunding(a.funding) : null, metrics: a.chain ? loadChain(a.chain.file) : null }));
var btc = data[0];
for (let rep = 0; rep < Number(process.env.REPS ?? 5); rep++) {
  let t = performance.now();
  const reg = computeRegimeSeries({ btc: btc.candles, fearGreed: fg, funding: btc.fund });
  const tr = performance.now() - t;
  t = performance.now();
  let tc = 0, ts = 0, ti = 0;
  for (const d of data) {
    let t0 = performance.now();
    const ch = d.a.chain ? computeChainHealthSeries({ chain: d.a.chain.id, metrics: d.metrics, regimeByDate: (x) => regimeAt(reg, x)?.regime ?? "neutral", dates: d.candles.map((c) => c.date) }) : null;
    tc += performance.now() - t0;
    t0 = performance.now();
    computeSignalSeries({ asset: d.a.asset, candles: d.candles, fearGreed: fg, funding: d.fund, regime: reg, chainHealth: ch, sources: { prices: "p", fear_greed: "f", funding: "x", chain_health: null } });
    ts += performance.now() - t0;
    t0 = performance.now();
    const cl = d.candles.map((c) => c.close);
    sma(cl, 200);
    sma(cl, 50);
    rsiWilder(cl);
    ti += performance.now() - t0;
  }
  console.log(`regime ${tr.toFixed(0)} chain ${tc.toFixed(0)} signal ${ts.toFixed(0)} (indicators alone ${ti.toFixed(0)})`);
}
