import { describe, expect, it } from 'vitest';
import { diagnosticSignals } from './serve.js';

describe('diagnosticSignals', () => {
  it.each([
    { flags: [], signals: [] },
    { flags: ['--heapsnapshot-signal=SIGUSR2'], signals: ['SIGUSR2'] },
    { flags: ['--heapsnapshot-signal', 'SIGHUP'], signals: ['SIGHUP'] },
    { flags: ['--report-on-signal'], signals: ['SIGUSR2'] },
    { flags: ['--report-on-signal', '--report-signal=SIGQUIT'], signals: ['SIGQUIT'] },
    // The last of a flag given twice wins, as in Node.
    { flags: ['--heapsnapshot-signal=SIGHUP', '--heapsnapshot-signal=SIGUSR2'], signals: ['SIGUSR2'] },
    // A report signal without --report-on-signal installs nothing.
    { flags: ['--report-signal=SIGQUIT'], signals: [] },
    { flags: ['--heapsnapshot-signal='], signals: [] },
  ])('$flags → $signals', ({ flags, signals }) => {
    expect(diagnosticSignals(flags)).toEqual(signals);
  });
});
