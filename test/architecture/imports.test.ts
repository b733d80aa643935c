import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import path from 'node:path';
import { test } from 'node:test';
import madge from 'madge';
import ts from 'typescript';
import { ROOT_DIR } from '../../src/config.ts';

/**
 * The import rule of docs/architecture.md ("The import rule"), checked on every import of every
 * file of src/, read with the TypeScript parser: static imports and re-exports (type-only ones
 * included), side-effect imports, `import()` and `require()` (whose argument must be a string
 * literal), `import.meta.resolve('x')`, `import('x')` types and worker entries
 * `new URL('./x.ts', import.meta.url)`:
 * - between areas of src/: engine <- providers/store <- services <- http/mcp (<- web); only the
 *   wiring files (core.ts, server.ts, cli.ts) know everything (`ALLOWED`, `TYPE_ONLY`);
 * - npm packages: each only in the areas that own it (`PACKAGES`);
 * - Node built-ins (`node:*`) everywhere but engine/, which stays pure;
 * - no import cycles (madge).
 */

const SRC = path.join(ROOT_DIR, 'src');
const WIRING = new Set(['core.ts', 'server.ts', 'cli.ts']);

/** The area of a file: its first folder under src/, or the file name for files at the top. */
function area(file: string): string {
  return file.includes('/') ? file.split('/')[0]! : file;
}

/** Whether a rule's list (areas, or single files given by their path) covers `file`. */
function covers(list: readonly string[], file: string): boolean {
  return list.includes(area(file)) || list.includes(file);
}

/** Which areas each area may import (besides itself). Specific files are allowed with their path. */
const ALLOWED: Record<string, readonly string[]> = {
  'errors.ts': [],
  'config.ts': [],
  'logger.ts': [],
  engine: [],
  providers: ['engine', 'errors.ts', 'config.ts'],
  store: ['engine', 'config.ts', 'errors.ts', 'auth/tiers.ts'],
  'rate-limit': ['auth/tiers.ts', 'engine/util.ts'],
  auth: ['store', 'config.ts', 'errors.ts'],
  services: ['engine', 'providers', 'store', 'auth', 'rate-limit', 'errors.ts', 'config.ts'],
  jobs: ['providers', 'services', 'store', 'engine', 'errors.ts'],
  http: ['services', 'auth', 'rate-limit', 'errors.ts', 'config.ts', 'engine'],
  mcp: ['services', 'rate-limit', 'errors.ts', 'engine'],
  admin: ['auth/tiers.ts'],
  web: ['http', 'services', 'auth', 'rate-limit', 'errors.ts', 'config.ts', 'engine'],
};

/** Imports allowed only as `import type` / `export type` (erased, never loaded). */
const TYPE_ONLY: Record<string, readonly string[]> = {
  'logger.ts': ['config.ts'],
};

/**
 * Which areas (or single files) may import each npm package (a subpath counts as its package;
 * `@scope/*` stands for every package of the scope). `types` may import its types only
 * (`import type`, `export type`, `import('x')` types). The wiring files may import any package
 * listed here. A package not listed here may not be imported from src/ at all.
 */
const PACKAGES: Record<string, { areas: readonly string[]; types?: readonly string[] }> = {
  // engine
  'trading-signals': { areas: ['engine'] },
  // store
  '@electric-sql/pglite': { areas: ['store'] },
  pg: { areas: ['store'] },
  'drizzle-orm': { areas: ['store'] },
  uuid: { areas: ['store'] },
  // providers (the live sources' retries); services (services/discard.ts: undoing a failed creation)
  'p-retry': { areas: ['providers', 'services'] },
  // auth
  jose: { areas: ['auth'] },
  'better-auth': { areas: ['auth'] },
  '@zxcvbn-ts/*': { areas: ['auth'] },
  // rate-limit; the live providers' per-host budget (docs/live-data.md)
  'rate-limiter-flexible': { areas: ['rate-limit', 'providers'] },
  // Redis: the client is made by the wiring; the limiter takes it
  ioredis: { areas: [], types: ['rate-limit'] },
  // services
  'lru-cache': { areas: ['services'] },
  // tsx's loader for the track-record worker when running from the sources (tests, npm run dev)
  tsx: { areas: ['services/track-record-thread.ts'] },
  // jobs
  croner: { areas: ['jobs'] },
  // logging: logger.ts makes the logger, the others take its type
  pino: { areas: ['logger.ts'], types: ['auth', 'http', 'mcp'] },
  // schemas: everywhere above the engine and the store
  zod: { areas: ['config.ts', 'providers', 'services', 'http', 'mcp'] },
  // the edges
  fastify: { areas: ['http', 'mcp', 'web'] },
  '@fastify/*': { areas: ['http', 'mcp', 'web'] },
  'fastify-type-provider-zod': { areas: ['http'] },
  'prom-client': { areas: ['http'] },
  '@modelcontextprotocol/sdk': { areas: ['mcp'] },
  'lightweight-charts': { areas: ['web'] },
  // the CLI
  commander: { areas: [] },
};

/**
 * Known breaks of the layering, each allowed for one file and one package only, reported in
 * docs/architecture.md ("Known exceptions") until they are moved where they belong. Do not add to
 * this list: move the code instead.
 */
const EXCEPTIONS: ReadonlyArray<{ file: string; pkg: string; why: string }> = [
  {
    file: 'auth/identity.ts',
    pkg: 'drizzle-orm',
    why: 'queries auth_session and auth_jwks with drizzle itself instead of through a store repository',
  },
  {
    file: 'http/identity.ts',
    pkg: 'better-auth',
    why: 'uses better-auth/node (fromNodeHeaders) instead of going through auth/identity-lazy.ts',
  },
];

/** The npm package a bare specifier names: `drizzle-orm/pg-core` -> `drizzle-orm`, `@a/b/c` -> `@a/b`. */
function packageOf(spec: string): string {
  const parts = spec.split('/');
  return spec.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!;
}

/** The `PACKAGES` entry of a package: its own, or its scope's `@scope/*`. */
function packageRule(pkg: string): { key: string; rule: (typeof PACKAGES)[string] } | undefined {
  if (PACKAGES[pkg]) return { key: pkg, rule: PACKAGES[pkg] };
  const scope = pkg.startsWith('@') ? `${pkg.split('/')[0]}/*` : undefined;
  if (scope && PACKAGES[scope]) return { key: scope, rule: PACKAGES[scope] };
  return undefined;
}

interface Import {
  /** The specifier as written (for a worker entry, the file it resolves to, relative to the importer). */
  spec: string;
  /** Erased at compile time: `import type`, `export type`, an `import('x')` type. */
  typeOnly: boolean;
  /** How it was written, for messages. */
  kind: string;
}

/** Every .ts file under src/, relative to src/. */
function sourceFiles(dir = SRC): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(p);
    return e.name.endsWith('.ts') ? [path.relative(SRC, p).split(path.sep).join('/')] : [];
  });
}

function isImportMetaUrl(n: ts.Node | undefined): boolean {
  return (
    !!n &&
    ts.isPropertyAccessExpression(n) &&
    n.name.text === 'url' &&
    ts.isMetaProperty(n.expression) &&
    n.expression.keywordToken === ts.SyntaxKind.ImportKeyword
  );
}

/** Every import of one file; `problems` collects the ones that cannot be checked. */
function importsOf(file: string, problems: string[]): Import[] {
  const text = readFileSync(path.join(SRC, file), 'utf8');
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const out: Import[] = [];
  const where = (n: ts.Node) => `${file}:${sf.getLineAndCharacterOfPosition(n.getStart(sf)).line + 1}`;
  const literal = (n: ts.Node | undefined): string | undefined =>
    n && (ts.isStringLiteral(n) || ts.isNoSubstitutionTemplateLiteral(n)) ? n.text : undefined;
  const visit = (n: ts.Node): void => {
    if (ts.isImportDeclaration(n) && ts.isStringLiteral(n.moduleSpecifier)) {
      const kind = n.importClause ? 'import' : 'side-effect import';
      out.push({ spec: n.moduleSpecifier.text, typeOnly: !!n.importClause?.isTypeOnly, kind });
    } else if (ts.isExportDeclaration(n) && n.moduleSpecifier && ts.isStringLiteral(n.moduleSpecifier)) {
      out.push({ spec: n.moduleSpecifier.text, typeOnly: n.isTypeOnly, kind: 'export from' });
    } else if (ts.isImportEqualsDeclaration(n) && ts.isExternalModuleReference(n.moduleReference)) {
      const spec = literal(n.moduleReference.expression);
      if (spec) out.push({ spec, typeOnly: n.isTypeOnly, kind: 'import = require' });
      else problems.push(`${where(n)}: import = require() of a computed name`);
    } else if (ts.isImportTypeNode(n)) {
      const arg = n.argument;
      const spec = ts.isLiteralTypeNode(arg) ? literal(arg.literal) : undefined;
      if (spec) out.push({ spec, typeOnly: true, kind: 'import() type' });
    } else if (ts.isCallExpression(n)) {
      const callee = n.expression;
      const dynamic = callee.kind === ts.SyntaxKind.ImportKeyword;
      const req = ts.isIdentifier(callee) && callee.text === 'require';
      const resolve = ts.isPropertyAccessExpression(callee) && callee.name.text === 'resolve' && ts.isMetaProperty(callee.expression);
      if (dynamic || req || resolve) {
        const kind = dynamic ? 'import()' : req ? 'require()' : 'import.meta.resolve()';
        const spec = literal(n.arguments[0]);
        if (spec) out.push({ spec, typeOnly: false, kind });
        else problems.push(`${where(n)}: ${kind} of a computed name (write the specifier as a string literal)`);
      }
    } else if (ts.isNewExpression(n) && ts.isIdentifier(n.expression) && n.expression.text === 'URL') {
      // new URL('./worker.ts', import.meta.url): a module loaded by its URL (a worker entry).
      const [target, base] = n.arguments ?? [];
      if (target && isImportMetaUrl(base)) {
        const dir = path.posix.dirname(file);
        let candidates: string[] = [];
        const spec = literal(target);
        if (spec !== undefined) candidates = [spec];
        else if (ts.isTemplateExpression(target) && target.templateSpans.at(-1)!.literal.text === '') {
          // `./track-record-worker.${ext}`: the .ts files whose path starts with the fixed head.
          const head = path.posix.join(dir, target.head.text);
          candidates = sourceFiles()
            .filter((f) => f.startsWith(head))
            .map((f) => `./${path.posix.relative(dir, f)}`);
          if (candidates.length === 0) problems.push(`${where(n)}: new URL(\`${target.head.text}…\`) matches no file`);
        } else problems.push(`${where(n)}: new URL(<computed>, import.meta.url)`);
        for (const c of candidates) if (/\.[cm]?[tj]s$/.test(c)) out.push({ spec: c, typeOnly: false, kind: 'new URL()' });
      }
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return out;
}

/** A relative specifier as a file of src/ (relative to src/), or undefined when it leaves src/ or does not exist. */
function resolveLocal(from: string, spec: string): string | undefined {
  const abs = path.resolve(SRC, path.dirname(from), spec);
  const rel = path.relative(SRC, abs).split(path.sep).join('/');
  if (rel.startsWith('..') || !existsSync(abs)) return undefined;
  return rel;
}

interface Edge {
  from: string;
  typeOnly: boolean;
  kind: string;
}
interface Scan {
  /** file -> files of src/ it imports. */
  local: Map<string, Map<string, Edge[]>>;
  /** file -> bare specifiers (packages and built-ins) it imports. */
  external: Map<string, Array<Import>>;
  problems: string[];
}

let scanned: Scan | undefined;
function scan(): Scan {
  if (scanned) return scanned;
  const s: Scan = { local: new Map(), external: new Map(), problems: [] };
  for (const file of sourceFiles()) {
    const local = new Map<string, Edge[]>();
    const external: Import[] = [];
    for (const imp of importsOf(file, s.problems)) {
      if (imp.spec.startsWith('.') || imp.spec.startsWith('/')) {
        const to = resolveLocal(file, imp.spec);
        if (!to) {
          // package.json and other files outside src/ are read, not imported as modules
          if (!/\.json$/.test(imp.spec)) s.problems.push(`${file}: ${imp.kind} '${imp.spec}' is not a file of src/`);
          continue;
        }
        local.set(to, [...(local.get(to) ?? []), { from: file, typeOnly: imp.typeOnly, kind: imp.kind }]);
      } else external.push(imp);
    }
    s.local.set(file, local);
    s.external.set(file, external);
  }
  scanned = s;
  return s;
}

let graph: Record<string, string[]> | undefined;
let cycles: string[][] = [];
async function load(): Promise<Record<string, string[]>> {
  if (!graph) {
    const res = await madge(SRC, {
      fileExtensions: ['ts'],
      tsConfig: path.join(ROOT_DIR, 'tsconfig.json'),
      detectiveOptions: { ts: { skipTypeImports: false, skipAsyncImports: false }, es6: { skipAsyncImports: false } },
    });
    graph = res.obj();
    cycles = res.circular();
  }
  return graph!;
}

test('the import scan covers every source file and every form of import', async () => {
  const s = scan();
  assert.deepEqual(s.problems, [], `imports the test cannot check:\n${s.problems.join('\n')}`);
  assert.ok(s.local.size >= 50, `found ${s.local.size} files`);
  // The scan sees each form of import the sources use today.
  const has = (file: string, to: string, kind: string) =>
    assert.ok(
      s.local
        .get(file)
        ?.get(to)
        ?.some((e) => e.kind === kind),
      `${file} -> ${to} (${kind}) is seen`,
    );
  has('cli.ts', 'core.ts', 'import()');
  has('core.ts', 'services/access.ts', 'import');
  has('services/track-record-thread.ts', 'services/track-record-worker.ts', 'new URL()');
  const ext = (file: string, spec: string, kind: string, typeOnly = false) =>
    assert.ok(
      s.external.get(file)?.some((i) => i.spec === spec && i.kind === kind && i.typeOnly === typeOnly),
      `${file} imports ${spec} (${kind}${typeOnly ? ', type only' : ''})`,
    );
  ext('store/db.ts', 'pg', 'import()');
  ext('rate-limit/limiter.ts', 'ioredis', 'import', true);
  ext('web/routes.ts', 'lightweight-charts', 'import.meta.resolve()');
  ext('services/track-record-thread.ts', 'tsx/esm/api', 'import.meta.resolve()');
  // madge's graph (a second reader) finds no edge the scan misses.
  const g = await load();
  const missed: string[] = [];
  for (const [file, deps] of Object.entries(g)) {
    for (const dep of deps) if (!s.local.get(file)?.has(dep)) missed.push(`${file} -> ${dep}`);
  }
  assert.deepEqual(missed, [], 'imports madge sees and the scan does not');
  assert.equal(Object.keys(g).length, s.local.size, 'madge and the scan see the same files');
});

test('imports point one way: engine <- providers/store <- services <- http/mcp; only core, server and cli wire', () => {
  const bad: string[] = [];
  for (const [file, deps] of scan().local) {
    if (WIRING.has(file)) continue;
    const from = area(file);
    const allowed = ALLOWED[from];
    assert.ok(allowed, `no rule for ${file}: add its area to ALLOWED and to docs/architecture.md`);
    const typeOnly = TYPE_ONLY[from] ?? [];
    for (const [dep, edges] of deps) {
      if (area(dep) === from || covers(allowed, dep)) continue;
      if (covers(typeOnly, dep)) {
        for (const e of edges) {
          if (!e.typeOnly) bad.push(`${file} -> ${dep} (${e.kind}; only \`import type\` is allowed)`);
        }
        continue;
      }
      bad.push(`${file} -> ${dep}`);
    }
  }
  assert.deepEqual(bad, [], `forbidden imports (see docs/architecture.md, "The import rule"):\n${bad.join('\n')}`);
});

test('no import cycle between files', async () => {
  await load();
  assert.deepEqual(cycles, [], `import cycles:\n${cycles.map((c) => c.join(' -> ')).join('\n')}`);
});

test('each npm package only in the areas that own it; Node built-ins everywhere but engine/', () => {
  const bad: string[] = [];
  for (const [file, imports] of scan().external) {
    for (const imp of imports) {
      const what = `${file} ${imp.kind} '${imp.spec}'`;
      if (imp.spec.startsWith('node:')) {
        if (area(file) === 'engine') bad.push(`${what}: the engine does no I/O and imports no Node built-in`);
        continue;
      }
      if (isBuiltin(imp.spec)) {
        bad.push(`${what}: write Node built-ins with the node: prefix`);
        continue;
      }
      const pkg = packageOf(imp.spec);
      const found = packageRule(pkg);
      if (!found) {
        bad.push(`${what}: ${pkg} is in no row of PACKAGES (test/architecture/imports.test.ts, docs/architecture.md)`);
        continue;
      }
      const { rule } = found;
      if (WIRING.has(file) || covers(rule.areas, file)) continue;
      if (imp.typeOnly && covers(rule.types ?? [], file)) continue;
      if (EXCEPTIONS.some((e) => e.file === file && e.pkg === pkg)) continue;
      const types = rule.types?.length ? `; types only: ${rule.types.join(', ')}` : '';
      bad.push(`${what}: ${pkg} belongs to ${rule.areas.join(', ') || 'the wiring files'}${types}`);
    }
  }
  assert.deepEqual(bad, [], `forbidden package imports (see docs/architecture.md, "The import rule"):\n${bad.join('\n')}`);
});

test('the package table is current: every row is a dependency and is used; every exception is still needed and reported', () => {
  const deps = Object.keys(
    (JSON.parse(readFileSync(path.join(ROOT_DIR, 'package.json'), 'utf8')) as { dependencies: Record<string, string> }).dependencies,
  );
  const used = new Set<string>();
  const usedExceptions = new Set<string>();
  for (const [file, imports] of scan().external) {
    for (const imp of imports) {
      if (imp.spec.startsWith('node:')) continue;
      const pkg = packageOf(imp.spec);
      const found = packageRule(pkg);
      if (found) used.add(found.key);
      const exc = EXCEPTIONS.find((e) => e.file === file && e.pkg === pkg);
      if (exc && !WIRING.has(file) && !covers(found?.rule.areas ?? [], file)) usedExceptions.add(`${exc.file} ${exc.pkg}`);
    }
  }
  for (const key of Object.keys(PACKAGES)) {
    const isDep = key.endsWith('/*') ? deps.some((d) => d.startsWith(key.slice(0, -1))) : deps.includes(key);
    assert.ok(isDep, `PACKAGES row ${key} is not a dependency in package.json`);
    assert.ok(used.has(key), `PACKAGES row ${key} is imported by no file of src/: remove it`);
  }
  for (const e of EXCEPTIONS) {
    assert.ok(usedExceptions.has(`${e.file} ${e.pkg}`), `exception ${e.file} ${e.pkg} is no longer needed: remove it`);
  }
  const doc = readFileSync(path.join(ROOT_DIR, 'docs', 'architecture.md'), 'utf8').replace(/\s+/g, ' ');
  for (const e of EXCEPTIONS) {
    assert.ok(doc.includes(`\`${e.file}\` imports \`${e.pkg}\``), `docs/architecture.md reports ${e.file} importing ${e.pkg}`);
  }
});

/**
 * The rows of a table of docs/architecture.md, found by the start of its header row: each cell as
 * the names it writes in backticks (`import type` is prose, not a name; "nothing in `src/`" is none).
 */
function docTable(header: string): string[][][] {
  const lines = readFileSync(path.join(ROOT_DIR, 'docs', 'architecture.md'), 'utf8').split('\n');
  const start = lines.findIndex((l) => l.startsWith(header));
  assert.ok(start >= 0, `docs/architecture.md has the table "${header}"`);
  const rows: string[][][] = [];
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith('|')) break;
    const cells = line.split('|').slice(1, -1);
    const names = (c: string) =>
      c.trim().startsWith('nothing') ? [] : [...c.matchAll(/`([^`]+)`/g)].map((m) => m[1]!).filter((n) => n !== 'import type');
    rows.push(cells.map(names));
  }
  return rows;
}

const sorted = (xs: Iterable<string>) => [...new Set(xs)].sort();

test('docs/architecture.md states the same rules as this test', () => {
  const areas: Record<string, string[]> = {};
  for (const [names, allowed] of docTable('| area | may import |')) {
    for (const n of names!) areas[n] = sorted(allowed!);
  }
  const expectedAreas = Object.fromEntries(Object.entries(ALLOWED).map(([a, list]) => [a, sorted([...list, ...(TYPE_ONLY[a] ?? [])])]));
  assert.deepEqual(areas, expectedAreas, 'the area table of docs/architecture.md and ALLOWED (with TYPE_ONLY) differ');

  const packages: Record<string, { areas: string[]; types: string[] }> = {};
  for (const [names, owners, types] of docTable('| package | owned by')) {
    for (const n of names!) packages[n] = { areas: sorted(owners!), types: sorted(types!) };
  }
  const expectedPackages = Object.fromEntries(
    Object.entries(PACKAGES).map(([p, r]) => [p, { areas: sorted(r.areas), types: sorted(r.types ?? []) }]),
  );
  assert.deepEqual(packages, expectedPackages, 'the package table of docs/architecture.md and PACKAGES differ');
});
