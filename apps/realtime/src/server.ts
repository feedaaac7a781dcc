import { createLogger } from '@herald/config';
import { configOrExit, onShutdown } from '@herald/config/serve';
import { loadConfig } from './config.js';
import { buildRealtime } from './realtime.js';

const config = configOrExit(() => loadConfig());
const log = createLogger(config.log, 'realtime');
for (const warning of config.warnings) log.warn(warning);
for (const warning of config.push.warnings) log.warn(warning);
const server = buildRealtime(config, log);
onShutdown(log, () => server.close());

const port = await server.listen();
log.info({ port }, 'listening');
