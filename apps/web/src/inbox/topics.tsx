import type { ConnectionState, HeraldClient, TopicSubscription } from '@herald/client';
import { useEffect, useState } from 'preact/hooks';

/**
 * The topics the user's token lets them subscribe to themselves, each a checkbox (subscribed or not);
 * nothing when the token allows none (the backend decides, in `POST /tokens` `topics`).
 */
export function TopicChoices({ client, connection }: { client: HeraldClient; connection: ConnectionState }) {
  const [topics, setTopics] = useState<TopicSubscription[] | undefined>(undefined);
  const live = connection === 'live';
  useEffect(() => {
    if (!live || topics !== undefined) return;
    client.topics().then(setTopics, () => undefined);
  }, [client, live, topics]);
  if (!topics || topics.length === 0) return null;
  const toggle = (topic: TopicSubscription) =>
    (topic.subscribed ? client.unsubscribeTopic(topic.topic) : client.subscribeTopic(topic.topic)).then(
      setTopics,
      () => undefined,
    );
  return (
    <fieldset class="topic-choices">
      <legend>Topics</legend>
      {topics.map((topic) => (
        <label key={topic.topic}>
          <input type="checkbox" checked={topic.subscribed} onChange={() => void toggle(topic)} />{' '}
          {topic.topic}
        </label>
      ))}
    </fieldset>
  );
}
