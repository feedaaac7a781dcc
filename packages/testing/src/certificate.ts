import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

/**
 * A self-signed P-256 certificate for `127.0.0.1`, valid one day, made by `openssl` into `dir`: for a
 * test's own HTTPS server (a stand-in push service), which the apps trust through `NODE_EXTRA_CA_CERTS`.
 *
 * @example
 * ```ts
 * const { cert, key } = loopbackCertificate(mkdtempSync(join(tmpdir(), 'push-')));
 * ```
 */
export function loopbackCertificate(dir: string): { cert: string; key: string } {
  const cert = join(dir, 'cert.pem');
  const key = join(dir, 'key.pem');
  execFileSync(
    'openssl',
    [
      ...['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1'],
      ...['-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', key, '-out', cert],
    ],
    { stdio: 'ignore' },
  );
  return { cert, key };
}
