import type { ConnectionState, HeraldClient, TopicSubscription } from '@herald/client';
import { useState } from 'preact/hooks';
import type { Actions } from './actions.js';
import { useLoadWhileShown } from './hooks.js';

/**
 * The topics the user's token lets them subscribe to themselves, each a checkbox (subscribed or not);
 * nothing when the token allows none (the backend decides, in `POST /tokens` `topics`).
 */
export function TopicChoices({
  client,
  connection,
  actions,
}: {
  client: HeraldClient;
  connection: ConnectionState;
  actions: Actions;
}) {
  const [topics, setTopics] = useState<TopicSubscription[] | undefined>(undefined);
  const live = connection === 'live';
  // Each time live, and each time the page is shown again: another tab may have changed them.
  useLoadWhileShown(live, () => client.topics().then(setTopics, () => undefined), client);
  if (!topics || topics.length === 0) return null;
  const toggle = (topic: TopicSubscription) =>
    actions.run(
      topic.subscribed ? `unsubscribe from ${topic.topic}` : `subscribe to ${topic.topic}`,
      () => (topic.subscribed ? client.unsubscribeTopic(topic.topic) : client.subscribeTopic(topic.topic)),
      setTopics,
    );
  return (
    <fieldset class="topic-choices">
      <legend>Topics</legend>
      {topics.map((topic) => (
        <label key={topic.topic}>
          {/* Controlled: it shows what the server said, not a click that did not take. */}
          <input
            type="checkbox"
            checked={topic.subscribed}
            onClick={(event) => {
              event.preventDefault();
              toggle(topic);
            }}
          />{' '}
          {topic.topic}
        </label>
      ))}
    </fieldset>
  );
}
