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
  if (addr.kind() === 'ipv6') {
    const v6 = addr as ipaddr.IPv6;
    // ::ffff:127.0.0.1 reaches 127.0.0.1; judge the IPv4 address it carries.
    if (v6.isIPv4MappedAddress()) addr = v6.toIPv4Address();
    else {
      const embedded = embeddedIpv4Range(v6.parts);
      if (embedded) return embedded;
    }
  }
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

/**
 * IPv6 forms that carry an IPv4 address which ipaddr.js calls plain `unicast`: the deprecated
 * IPv4-compatible `::a.b.c.d` (::/96, apart from :: and ::1) is refused whatever it carries, as
 * is RFC 8215's local-use NAT64 prefix 64:ff9b:1::/48, which translates to any IPv4 address
 * its operator chooses, private ones included.
 */
function embeddedIpv4Range(parts: number[]): string | undefined {
  if (parts.slice(0, 6).every((p) => p === 0) && (parts[6] !== 0 || parts[7] > 1)) return 'ipv4Compatible';
  if (parts[0] === 0x64 && parts[1] === 0xff9b && parts[2] === 1) return 'rfc8215';
  return undefined;
}
