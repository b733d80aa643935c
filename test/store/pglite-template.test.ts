import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sql } from 'drizzle-orm';
import { ensurePgliteTemplate, openDatabase, pgliteTemplateFile } from '../../src/store/db.ts';
import { UserRepo } from '../../src/store/user-repo.ts';

/*
 * The embedded database's template (src/store/db.ts, made by `npm run build`): a first start
 * loads a migrated data directory instead of running initdb, and the result is the same
 * database as one made by initdb and the migrations.
 */

test('a new embedded database is loaded from the build template, migrated, and opens as existing afterwards', async () => {
  const made = await ensurePgliteTemplate();
  assert.equal(made.file, pgliteTemplateFile());
  assert.ok(existsSync(made.file));
  assert.match(path.basename(made.file), /^pglite-template-[0-9a-f]{16}\.tar\.gz$/);
  assert.equal((await ensurePgliteTemplate()).made, false, 'made once per migrations');

  const dir = path.join(mkdtempSync(path.join(tmpdir(), 'pglite-template-')), 'db');
  try {
    const first = await openDatabase({ pgliteDir: dir });
    try {
      assert.equal(first.created, 'template');
      assert.equal(statSync(dir).mode & 0o777, 0o700, "the data directory is the owner's alone");
      const applied = (await first.db.execute(sql`select count(*)::int as n from drizzle.__drizzle_migrations`)) as unknown as {
        rows: { n: number }[];
      };
      assert.ok(Number(applied.rows[0]?.n) >= 5, 'every migration recorded');
      await new UserRepo(first.db).setTierByEmail('nobody@example.com', 'pro');
      await first.db.execute(sql`create table template_probe (x int)`);
    } finally {
      await first.close();
    }
    const again = await openDatabase({ pgliteDir: dir });
    try {
      assert.equal(again.created, 'existing');
      await again.db.execute(sql`select * from template_probe`);
    } finally {
      await again.close();
    }

    const mem = await openDatabase({ pgliteDir: 'memory://' });
    try {
      assert.equal(mem.created, 'template', 'memory:// loads the template too');
      await assert.rejects(mem.db.execute(sql`select * from template_probe`), 'each new database is a fresh copy');
    } finally {
      await mem.close();
    }
  } finally {
    rmSync(path.dirname(dir), { recursive: true, force: true });
  }
});
