import { type Logger, pino } from 'pino';
import pretty from 'pino-pretty';
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
 * The pino logger of an app (for Fastify, its `loggerInstance`), tagged with `service` when given.
 * `pretty` writes through pino-pretty in the app's own thread, not as a pino transport: the transport's
 * worker thread stops at its first refused write (EPIPE: the one-terminal stack's launcher killed, or a
 * `| head` that has ended), and the app's exit then waited 10 s for it to flush.
 *
 * @example
 * ```ts
 * const log = createLogger(config.log, 'worker');
 * const app = Fastify({ loggerInstance: createLogger(config.log, 'web') });
 * ```
 */
export function createLogger(settings: LogSettings, service?: string): Logger {
  const options = {
    level: settings.level,
    ...(service === undefined ? {} : { base: { service } }),
  };
  return settings.format === 'pretty' ? pino(options, pretty({ ...PRETTY_LOG, sync: true })) : pino(options);
}
