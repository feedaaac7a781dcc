/**
 * Escapes an id for use inside a Redis Cluster hash tag: `%` → `%25`, `{` → `%7B`, `}` → `%7D`, and the
 * empty string → `%` (an empty tag `{}` would make Redis hash the whole key). The mapping is injective
 * (two different ids never give one escaped string) and keeps plain ids as they are.
 *
 * @example
 * ```ts
 * escapeId('user-42'); // 'user-42'
 * escapeId('a{b}');    // 'a%7Bb%7D'
 * ```
 */
export function escapeId(id: string): string {
  if (id === '') return '%';
  // Fast path: most ids have none of the three characters.
  if (!/[%{}]/.test(id)) return id;
  return id.replace(/[%{}]/g, (char) => (char === '%' ? '%25' : char === '{' ? '%7B' : '%7D'));
}

/**
 * The inverse of {@link escapeId}: what an operator reads back from a key.
 *
 * @example
 * ```ts
 * unescapeId('a%7Bb%7D'); // 'a{b}'
 * ```
 */
export function unescapeId(escaped: string): string {
  if (escaped === '%') return '';
  return escaped.replace(/%(25|7B|7D)/g, (_, hex: string) => (hex === '25' ? '%' : hex === '7B' ? '{' : '}'));
}

/**
 * The Redis key of `id`'s bucket under `prefix`: `<prefix>{<id>}`, or with a group hash tag
 * `<prefix>{<tag>}:<id>` (ids and tags escaped by {@link escapeId}). Every key has exactly one hash tag,
 * so on Redis Cluster the keys of one call share a slot when they share the tag.
 *
 * @example
 * ```ts
 * bucketKey('ratelimit:', 'user-42');                   // 'ratelimit:{user-42}'
 * bucketKey('ratelimit:recipient:', 'user-42', 'key-7'); // 'ratelimit:recipient:{key-7}:user-42'
 * ```
 */
export function bucketKey(prefix: string, id: string, tag?: string): string {
  return tag === undefined ? `${prefix}{${escapeId(id)}}` : `${prefix}{${escapeId(tag)}}:${escapeId(id)}`;
}
