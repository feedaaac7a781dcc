export {
  decodeLiveMessage,
  encodeLiveMessage,
  LIVE_MESSAGE_VERSION,
  type LiveChannelSettings,
  type LiveMessage,
  LiveMessageError,
  type LiveNotificationMessage,
  type LiveUnreadMessage,
  liveChannel,
  type PubsubMode,
} from './message.js';
export { type LivePublishErrorHandler, type LivePublisher, livePublisher } from './publisher.js';
export {
  type LiveListener,
  LiveSubscriber,
  type LiveSubscriberOptions,
  type LiveSubscription,
} from './subscriber.js';
