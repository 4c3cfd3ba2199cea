import ipaddr from 'ipaddr.js';

/**
 * Why an address may not be fetched, or undefined when it is an ordinary public unicast
 * address. Everything ipaddr.js does not classify as global `unicast` is refused: loopback,
 * private (RFC 1918, IPv6 unique-local), link-local (which holds the 169.254.169.254 cloud
 * metadata endpoint), carrier-grade NAT (Alibaba's metadata address), multicast, reserved, and
 * the IPv6 transition ranges that can embed any of these.
 */
export function blockedRange(ip: string): string | undefined {
  let addr: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    addr = ipaddr.parse(ip.replace(/^\[|\]$/g, '').replace(/%.*$/, ''));
  } catch {
    return 'unparseable';
  }
  // ::ffff:127.0.0.1 reaches 127.0.0.1; judge the IPv4 address it carries.
  if (addr.kind() === 'ipv6' && (addr as ipaddr.IPv6).isIPv4MappedAddress()) addr = (addr as ipaddr.IPv6).toIPv4Address();
  const range = addr.range();
  return range === 'unicast' ? undefined : range;
}

export function isIpLiteral(host: string): boolean {
  return ipaddr.isValid(host.replace(/^\[|\]$/g, ''));
}

/** `host` or `host:port` entries of MEDIA_FETCH_ALLOWED_HOSTS, compared case-insensitively. */
export function isAllowedHost(url: URL, allowedHosts: readonly string[]): boolean {
  if (allowedHosts.length === 0) return false;
  const host = url.hostname.toLowerCase();
  const bare = host.replace(/^\[|\]$/g, '');
  const port = url.port || (url.protocol === 'https:' ? '443' : '80');
  return allowedHosts.some((entry) => {
    const e = entry.toLowerCase();
    return e === host || e === bare || e === `${host}:${port}` || e === `${bare}:${port}`;
  });
}
