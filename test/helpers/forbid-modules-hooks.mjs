// Resolve hook (node:module register): refuses the packages listed in FORBID_MODULES.
const forbidden = (process.env.FORBID_MODULES ?? '')
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean);

export async function resolve(specifier, context, next) {
  for (const f of forbidden) {
    if (specifier === f || specifier.startsWith(`${f}/`)) {
      throw new Error(`FORBIDDEN MODULE ${specifier} imported by ${context.parentURL}`);
    }
  }
  return next(specifier, context);
}
