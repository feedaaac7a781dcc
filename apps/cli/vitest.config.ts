import { heraldTestConfig } from '@herald/testing/vitest';

export default heraldTestConfig({
  // Files that start apps and servers: loaded once per worker, not once per file (see the option).
  isolate: false,
});
