import Type from 'typebox';

/**
 * pino-pretty options every Herald app uses when `HERALD_LOG_FORMAT=pretty` (the one-terminal stack):
 * one line per entry, so that the stack's `gateway | …` prefixes stay readable.
 */
export const PRETTY_LOG = Object.freeze({
  singleLine: true,
  translateTime: 'HH:MM:ss.l',
  ignore: 'pid,hostname,service',
});

/**
 * The logging variables every Herald app reads, as TypeBox properties to spread into its env schema.
 *
 * @example
 * ```ts
 * const EnvSchema = Type.Object({ PORT: Type.Integer(), ...LogEnv });
 * ```
 */
export const LogEnv = {
  HERALD_LOG_LEVEL: Type.Union(
    ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((level) => Type.Literal(level)),
    { default: 'info' },
  ),
  HERALD_LOG_FORMAT: Type.Union([Type.Literal('json'), Type.Literal('pretty')], { default: 'json' }),
};

/** An app's logging settings, parsed from {@link LogEnv}. */
export interface LogSettings {
  level: string;
  format: 'json' | 'pretty';
}

/**
 * The {@link LogSettings} from parsed {@link LogEnv} values.
 *
 * @example
 * ```ts
 * const log = logSettings(parsed); // { level: 'info', format: 'json' }
 * ```
 */
export function logSettings(parsed: {
  HERALD_LOG_LEVEL: string;
  HERALD_LOG_FORMAT: 'json' | 'pretty';
}): LogSettings {
  return Object.freeze({ level: parsed.HERALD_LOG_LEVEL, format: parsed.HERALD_LOG_FORMAT });
}

/**
 * pino options (also Fastify's `logger` option) for `settings`, tagged with `service` when given.
 *
 * @example
 * ```ts
 * const log = pino(loggerOptions(config.log, 'worker'));
 * ```
 */
export function loggerOptions(
  settings: LogSettings,
  service?: string,
): { level: string; base?: { service: string }; transport?: { target: string; options: typeof PRETTY_LOG } } {
  return {
    level: settings.level,
    ...(service === undefined ? {} : { base: { service } }),
    ...(settings.format === 'pretty' ? { transport: { target: 'pino-pretty', options: PRETTY_LOG } } : {}),
  };
}
