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
export { type LivePublisher, type LivePublishErrorHandler, livePublisher } from './publisher.js';
export {
  type LiveListener,
  type LiveSubscriberOptions,
  LiveSubscriber,
  type LiveSubscription,
} from './subscriber.js';
