import { defineConfig } from 'drizzle-kit';

export default defineConfig({
  dialect: 'postgresql',
  schema: ['./src/store/schema.ts', './src/store/auth-schema.ts'],
  out: './src/store/migrations',
});
