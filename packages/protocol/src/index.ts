export * from './admin.js';
export * from './error-codes.js';
export * from './events.js';
export * from './names.js';
export * from './schemas.js';
export * from './tenancy.js';
export * from './topics.js';
export * from './user-token.js';
