/**
 * What the operator CLI (`@herald/cli`) uses of the worker: its configuration (queue name and prefix),
 * through this entry (`@herald/worker/operator`).
 */
export { loadConfig, type WorkerConfig } from './config.js';
