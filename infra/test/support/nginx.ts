/** `upstream <name> { … server <address>; … }` blocks: name → server addresses, in order. */
export function nginxUpstreams(config: string): Map<string, string[]> {
  const upstreams = new Map<string, string[]>();
  for (const match of config.matchAll(/^upstream\s+(\S+)\s*\{([^}]*)\}/gm)) {
    const servers = [...(match[2] ?? '').matchAll(/^\s*server\s+([^\s;]+)/gm)].map(
      (server) => server[1] as string,
    );
    upstreams.set(match[1] as string, servers);
  }
  return upstreams;
}

/** A `location <prefix> { proxy_pass http://<upstream>[/]; }`: where it goes, and whether the prefix is stripped. */
export interface NginxLocation {
  upstream: string | undefined;
  /** `proxy_pass http://x/;` (a URI part) replaces the location's prefix; `proxy_pass http://x;` keeps it. */
  stripsPrefix: boolean;
}

/** The `location` blocks of the config, by prefix (`= /x` exact locations under `/x`). */
export function nginxLocations(config: string): Map<string, NginxLocation> {
  const locations = new Map<string, NginxLocation>();
  for (const match of config.matchAll(/^\s*location\s+(?:(?:=|~\*?)\s+)?(\S+)\s*\{([^}]*)\}/gm)) {
    const pass = /proxy_pass\s+http:\/\/([^/;\s]+)(\/?)\s*;/.exec(match[2] ?? '');
    locations.set(match[1] as string, { upstream: pass?.[1], stripsPrefix: pass?.[2] === '/' });
  }
  return locations;
}
