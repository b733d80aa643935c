-- The usage flush (services/usage.ts, KeyRepo.addUsage) rewrites every used key's row every
-- USAGE_FLUSH_MS. With full pages each update writes the new row version to another page and
-- a new entry into every index of the table; the embedded database (PGlite) runs no
-- autovacuum, so the table and its indexes grew with every flush. Half-full pages let the
-- update stay in its page (a heap-only tuple, no index entry; the old version is pruned in
-- place): the usage columns are in no index. Measured on PGlite, 3,000 keys, 40 flushes:
-- 47-58 ms per flush and a table that stays at 1.8 MB, against 80-120 ms and 1.7 -> 17 MB
-- (docs/benchmarks.md, "Eighth session"). Applies to pages written from now on: a table
-- that has grown keeps its size (nothing vacuums it) but stops growing.
ALTER TABLE "api_keys" SET (fillfactor = 50);
