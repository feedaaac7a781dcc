export {
  CostExceedsCapacityError,
  type FailureReason,
  RateLimiterError,
  RateLimiterErrorCode,
  RateLimiterUnavailableError,
} from './errors.js';
export { bucketKey, escapeId, unescapeId } from './keys.js';
export { expandLua } from './lua.js';
export {
  type DecisionSource,
  type FailureMode,
  type FailureOptions,
  type Policy,
  type PolicyCounters,
  type PolicyOptions,
  type PolicyState,
  type RateLimitCost,
  type RateLimitDecision,
  RateLimiter,
  type RateLimiterLogger,
  type RateLimiterOptions,
  type RateLimitKey,
  type RateLimitResult,
} from './rate-limiter.js';
export { type Algorithm, batchScriptSource, LuaCode, scriptSource } from './scripts.js';
