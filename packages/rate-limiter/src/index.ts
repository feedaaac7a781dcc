export { type RateLimitDecision, TokenBucket, type TokenBucketOptions } from './token-bucket.js';
