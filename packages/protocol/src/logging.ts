/**
 * pino-pretty options every Herald app uses when `HERALD_LOG_FORMAT=pretty` (the one-terminal stack):
 * one line per entry, so that the stack's `gateway | …` prefixes stay readable.
 */
export const PRETTY_LOG = Object.freeze({
  singleLine: true,
  translateTime: 'HH:MM:ss.l',
  ignore: 'pid,hostname,service',
});
