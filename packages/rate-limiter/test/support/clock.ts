/** Where the tests' injected clocks start (ms since epoch, 2025-10-09): far from 0, a whole number of µs. */
export const START_MS = 1_760_000_000_000;
