import type { AdminSnapshot } from '@herald/protocol';
import { useEffect, useState } from 'preact/hooks';
import { KEY_STORAGE, retryFailed, type StreamState, streamSnapshots } from './api.js';
import { TokenChart, TrafficChart } from './charts.js';
import { addSnapshot, emptyHistory, type TokenHistory } from './history.js';
import { Connections, FailedJobs, HotUsers, Latency, QueueCounts, ResumeOutcomes } from './tables.js';

/** Asks for the admin key (`HERALD_ADMIN_KEY`), kept in this tab's sessionStorage only. */
function KeyForm(props: { problem: string | undefined; onKey: (key: string) => void }) {
  const [key, setKey] = useState('');
  return (
    <form
      class="card key-form"
      onSubmit={(event) => {
        event.preventDefault();
        if (key.trim()) props.onKey(key.trim());
      }}
    >
      <h2>Admin key</h2>
      <p>
        The dashboard reads the gateway's admin API with the operator's key, <code>HERALD_ADMIN_KEY</code>{' '}
        (never a tenant's API key). It is kept for this tab only.
      </p>
      {props.problem && (
        <p class="problem" role="alert">
          {props.problem}
        </p>
      )}
      <label for="admin-key">Admin key</label>
      <input
        id="admin-key"
        type="password"
        autocomplete="off"
        spellcheck={false}
        value={key}
        onInput={(event) => setKey((event.target as HTMLInputElement).value)}
      />
      <button type="submit">Open the dashboard</button>
    </form>
  );
}

function StateLine({ state, at }: { state: StreamState; at: string | undefined }) {
  const text =
    state.kind === 'live'
      ? `live · updated ${at ? new Date(at).toLocaleTimeString() : ''}`
      : state.kind === 'connecting'
        ? 'connecting…'
        : state.kind === 'reconnecting'
          ? `reconnecting in ${Math.round(state.inMs / 1000)} s (${state.reason})`
          : state.message;
  return (
    <p class={`state ${state.kind}`} data-state={state.kind}>
      {text}
    </p>
  );
}

/** The operator dashboard: the admin key form, then everything the stream pushes, every second. */
export function Dashboard() {
  const [key, setKey] = useState<string | undefined>(() => sessionStorage.getItem(KEY_STORAGE) ?? undefined);
  const [problem, setProblem] = useState<string | undefined>();
  const [state, setState] = useState<StreamState>({ kind: 'connecting' });
  const [snapshot, setSnapshot] = useState<AdminSnapshot | undefined>();
  const [history, setHistory] = useState<TokenHistory>(emptyHistory);

  useEffect(() => {
    if (key === undefined) return;
    const controller = new AbortController();
    void streamSnapshots(
      key,
      (next) => {
        setSnapshot(next);
        setHistory((past) => addSnapshot(past, next));
      },
      (next) => {
        setState(next);
        if (next.kind === 'refused') {
          // Not the admin key (401) or the admin API is off (404): ask again, saying why.
          sessionStorage.removeItem(KEY_STORAGE);
          setProblem(next.message);
          setKey(undefined);
        }
      },
      controller.signal,
    );
    return () => controller.abort();
  }, [key]);

  if (key === undefined) {
    return (
      <KeyForm
        problem={problem}
        onKey={(entered) => {
          sessionStorage.setItem(KEY_STORAGE, entered);
          setProblem(undefined);
          setSnapshot(undefined);
          setHistory(emptyHistory());
          setKey(entered);
        }}
      />
    );
  }
  return (
    <>
      <div class="toolbar">
        <StateLine state={state} at={snapshot?.at} />
        <button
          type="button"
          onClick={() => {
            sessionStorage.removeItem(KEY_STORAGE);
            setKey(undefined);
          }}
        >
          Forget the key
        </button>
      </div>
      {snapshot ? (
        <div class="grid" data-at={snapshot.at}>
          <section class="card wide">
            <h2>Rate-limit decisions per second (every gateway)</h2>
            <TrafficChart traffic={snapshot.traffic} />
          </section>
          <section class="card wide">
            <h2>Token levels of the hottest users</h2>
            <TokenChart history={history} />
          </section>
          <HotUsers users={snapshot.hotUsers} />
          <QueueCounts queue={snapshot.queue} />
          <Connections instances={snapshot.realtime} />
          <ResumeOutcomes resume={snapshot.resume} />
          <Latency latency={snapshot.latency} />
          <FailedJobs failed={snapshot.failed} retry={(id) => retryFailed(key, id)} />
        </div>
      ) : (
        <p class="muted">Waiting for the first snapshot…</p>
      )}
    </>
  );
}
