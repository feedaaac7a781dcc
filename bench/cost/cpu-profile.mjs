// Loaded with `node --import` (NODE_OPTIONS refuses --cpu-prof): profiles the process with V8's
// sampling profiler and writes `<HERALD_BENCH_PROF_DIR>/<pid>.cpuprofile` when it exits.
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { join } from 'node:path';

const dir = process.env.HERALD_BENCH_PROF_DIR;
if (dir) {
  const session = new Session();
  session.connect();
  session.post('Profiler.enable');
  session.post('Profiler.start');
  process.on('exit', () => {
    // The in-process session answers synchronously: the file is written before the process ends.
    session.post('Profiler.stop', (error, result) => {
      if (!error) writeFileSync(join(dir, `${process.pid}.cpuprofile`), JSON.stringify(result.profile));
    });
  });
}
