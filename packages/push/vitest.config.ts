import { heraldTestConfig } from '@herald/testing/vitest';

export default heraldTestConfig();
