import type { AdminSnapshot, FailedJob } from '@herald/protocol';
import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { userLabel } from './history.js';

const number = new Intl.NumberFormat();
const ms = (value: number | null) => (value === null ? '–' : `${number.format(value)} ms`);
const time = (iso: string | null) => (iso === null ? '–' : new Date(iso).toLocaleTimeString());

/** A titled table of label → value rows (`th` scope row, so a screen reader reads them as pairs). */
function Pairs(props: { title: string; rows: [string, ComponentChildren][]; empty?: string }) {
  return (
    <section class="card">
      <h2>{props.title}</h2>
      {props.rows.length === 0 ? (
        <p class="muted">{props.empty ?? 'Nothing yet.'}</p>
      ) : (
        <table>
          <tbody>
            {props.rows.map(([label, value]) => (
              <tr key={label}>
                <th scope="row">{label}</th>
                <td>{value}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

/** The hot users now: tokens left (peeked), decisions and denials in the window. */
export function HotUsers({ users }: { users: AdminSnapshot['hotUsers'] }) {
  return (
    <section class="card wide">
      <h2>Hottest rate-limited users (last minute)</h2>
      {users.length === 0 ? (
        <p class="muted">No recipient was rate-limited in the last minute.</p>
      ) : (
        <table aria-label="Hot users">
          <thead>
            <tr>
              <th scope="col">user</th>
              <th scope="col">tokens left now</th>
              <th scope="col">decisions</th>
              <th scope="col">denied</th>
            </tr>
          </thead>
          <tbody>
            {users.map((user) => (
              <tr key={userLabel(user)} data-user={userLabel(user)}>
                <th scope="row">{userLabel(user)}</th>
                <td class="tokens">
                  {user.tokens ? `${user.tokens.remaining} / ${user.tokens.limit}` : '–'}
                </td>
                <td>{number.format(user.decisions)}</td>
                <td>{number.format(user.denied)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

export function QueueCounts({ queue }: { queue: AdminSnapshot['queue'] }) {
  return (
    <Pairs
      title="Queue (jobs: an envelope is one job for many notifications)"
      rows={Object.entries(queue).map(([state, count]) => [state, number.format(count)])}
    />
  );
}

export function Connections({ instances }: { instances: AdminSnapshot['realtime'] }) {
  const total = instances.reduce((sum, instance) => sum + instance.connections, 0);
  return (
    <Pairs
      title={`Connections (${number.format(total)})`}
      rows={instances.map((instance) => [instance.instanceId, number.format(instance.connections)])}
      empty="No realtime instance reported in the last 3 s."
    />
  );
}

export function ResumeOutcomes({ resume }: { resume: AdminSnapshot['resume'] }) {
  return (
    <Pairs
      title="Connections and resumes (last minute)"
      rows={[
        ['fresh (live from now)', number.format(resume.fresh)],
        ['recovered from their offset', number.format(resume.recovered)],
        ['resync (offset gone)', number.format(resume.resync)],
        ['notifications replayed', number.format(resume.replayed)],
      ]}
    />
  );
}

export function Latency({ latency }: { latency: AdminSnapshot['latency'] }) {
  return (
    <Pairs
      title="Delivery latency, creation → client ack (last minute)"
      rows={[
        ['acked notifications', number.format(latency.count)],
        ['p50', ms(latency.p50)],
        ['p90', ms(latency.p90)],
        ['p99', ms(latency.p99)],
        ['max', ms(latency.max)],
      ]}
    />
  );
}

/** The newest failed notifications, each with a Retry button (`POST /admin/failed/:id/retry`). */
export function FailedJobs(props: { failed: AdminSnapshot['failed']; retry: (id: string) => Promise<void> }) {
  const [busy, setBusy] = useState<Record<string, string>>({});
  const onRetry = (job: FailedJob) => {
    setBusy((state) => ({ ...state, [job.id]: 'retrying…' }));
    props.retry(job.id).then(
      () => setBusy((state) => ({ ...state, [job.id]: 'retried' })),
      (error: Error) => setBusy((state) => ({ ...state, [job.id]: error.message })),
    );
  };
  const { count, jobs } = props.failed;
  return (
    <section class="card wide">
      <h2>Failed notifications ({number.format(count)})</h2>
      {jobs.length === 0 ? (
        <p class="muted">None: every notification was delivered or is on its way.</p>
      ) : (
        <table aria-label="Failed notifications">
          <thead>
            <tr>
              <th scope="col">id</th>
              <th scope="col">user</th>
              <th scope="col">attempts</th>
              <th scope="col">failed at</th>
              <th scope="col">reason</th>
              <th scope="col">
                <span class="visually-hidden">action</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {jobs.map((job) => (
              <tr key={job.id} data-job={job.id}>
                <th scope="row" class="mono">
                  {job.id}
                </th>
                <td>{job.userId === '' ? '–' : userLabel(job)}</td>
                <td>{job.attempts}</td>
                <td>{time(job.failedAt)}</td>
                <td class="reason">{job.reason}</td>
                <td>
                  {busy[job.id] ? (
                    <span role="status">{busy[job.id]}</span>
                  ) : (
                    <button type="button" onClick={() => onRetry(job)} aria-label={`Retry ${job.id}`}>
                      Retry
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
