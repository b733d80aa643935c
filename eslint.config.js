// ESLint flat config: the recommended JavaScript and typescript-eslint rules on the TypeScript
// sources; formatting is Prettier's (eslint-config-prettier turns off the rules it owns).
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/**', '.data/**', 'dist/**', 'src/store/migrations/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  prettier,
  { files: ['**/*.mjs', '**/*.js'], ignores: ['src/web/static/**'], languageOptions: { globals: globals.node } },
  // The dashboard's scripts run in the browser (ES modules served as they are).
  { files: ['src/web/static/**/*.js'], languageOptions: { globals: globals.browser, sourceType: 'module' } },
  {
    files: ['**/*.ts'],
    rules: {
      // Unused names starting with `_` are deliberate (destructuring to drop a field, callback parameters).
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_' },
      ],
      // Tests read untyped JSON bodies (`res.json() as any`); the sources keep `any` out by review.
      '@typescript-eslint/no-explicit-any': 'off',
    },
  },
);
