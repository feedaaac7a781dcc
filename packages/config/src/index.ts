export * from './app-env.js';
export * from './deployment.js';
export * from './env.js';
export * from './logging.js';
export * from './partitions.js';
export * from './redis.js';
export * from './secrets.js';
export * from './stats.js';
