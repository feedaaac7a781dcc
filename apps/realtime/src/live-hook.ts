import { NOTIFICATION_EVENT, type NotificationEvent } from '@herald/protocol';
import type { Socket } from 'socket.io';

// socket.io-parser packet type of an event.
const EVENT_PACKET = 2;

interface Packet {
  type: number;
  data?: unknown[];
}
interface HookableAdapter {
  _encode(packet: Packet, options: unknown): unknown;
  apply(options: unknown, callback: (socket: Socket) => void): void;
}
type AdapterFactory = (nsp: unknown) => unknown;

/**
 * Wraps a Socket.IO adapter factory so that `notification` broadcasts (from the workers, through Redis)
 * reach `deliver(socket, event)` for each target socket instead of going straight to the wire: the
 * per-socket {@link Delivery} then orders them after the replay and drops duplicates. Every other
 * broadcast (e.g. `unread`) is untouched.
 *
 * How: socket.io-adapter's `broadcast()` (which the Redis adapters call for messages from other nodes)
 * encodes the packet with `this._encode(packet)` and then walks the target sockets with
 * `this.apply(opts, write)`; the wrapper remembers the packet in `_encode` and swaps `write` in `apply`.
 * Checked at start-up: if a future socket.io-adapter drops either method, this throws rather than
 * silently delivering past the gate.
 */
export function withNotificationHook(
  factory: AdapterFactory,
  deliver: (socket: Socket, event: NotificationEvent) => void,
): AdapterFactory {
  // A `function`, not an arrow: Socket.IO calls it with `new`.
  return function hookedAdapter(nsp: unknown) {
    const adapter = factory(nsp) as HookableAdapter;
    if (typeof adapter._encode !== 'function' || typeof adapter.apply !== 'function') {
      throw new Error('socket.io-adapter has no _encode/apply: the notification hook needs updating');
    }
    const encode = adapter._encode.bind(adapter);
    const apply = adapter.apply.bind(adapter);
    let current: Packet | undefined;
    adapter._encode = (packet, options) => {
      current = packet;
      return encode(packet, options);
    };
    adapter.apply = (options, callback) => {
      const packet = current;
      current = undefined;
      if (packet?.type === EVENT_PACKET && packet.data?.[0] === NOTIFICATION_EVENT) {
        const event = packet.data[1] as NotificationEvent;
        apply(options, (socket) => deliver(socket, event));
        return;
      }
      apply(options, callback);
    };
    return adapter;
  };
}
