import { isIP, isIPv4, isIPv6 } from 'node:net';

// The SSRF guard's address rules (contract §7): every address that is not globally routable is
// refused. IPv6 forms that embed an IPv4 address (mapped, translated, NAT64, 6to4) are judged by
// the IPv4 address inside, so `::ffff:127.0.0.1` is loopback however it is spelled; outside
// global unicast (2000::/3) every IPv6 address is refused.

type Range = [prefix: number[], bits: number, kind: string];

const V4: Range[] = [
  [[0, 0, 0, 0], 8, 'unspecified'],
  [[10, 0, 0, 0], 8, 'private'],
  [[100, 64, 0, 0], 10, 'CGNAT'],
  [[127, 0, 0, 0], 8, 'loopback'],
  [[169, 254, 0, 0], 16, 'link-local'], // includes the cloud metadata address 169.254.169.254
  [[172, 16, 0, 0], 12, 'private'],
  [[192, 0, 0, 0], 24, 'reserved'], // IETF protocol assignments
  [[192, 0, 2, 0], 24, 'documentation'],
  [[192, 88, 99, 0], 24, 'reserved'], // 6to4 relay anycast
  [[192, 168, 0, 0], 16, 'private'],
  [[198, 18, 0, 0], 15, 'benchmarking'],
  [[198, 51, 100, 0], 24, 'documentation'],
  [[203, 0, 113, 0], 24, 'documentation'],
  [[224, 0, 0, 0], 4, 'multicast'],
  [[240, 0, 0, 0], 4, 'reserved'], // includes the broadcast address 255.255.255.255
];

// Ranges whose last 32 bits are an IPv4 address (checked before the V6 table).
const EMBEDDING: Array<[prefix: number[], bits: number, v4Offset: number]> = [
  [[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff], 96, 12], // IPv4-mapped ::ffff:a.b.c.d
  [[0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0], 96, 12], // IPv4-translated ::ffff:0:a.b.c.d (SIIT)
  [[0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0], 96, 12], // NAT64 64:ff9b::a.b.c.d
  [[0x20, 0x02], 16, 2], // 6to4 2002:aabb:ccdd::
];

const V6: Range[] = [
  [[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 128, 'unspecified'],
  [[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], 128, 'loopback'],
  [[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 96, 'reserved'], // IPv4-compatible (deprecated)
  [[0, 0x64, 0xff, 0x9b, 0, 1], 48, 'private'], // local-use NAT64
  [[1, 0, 0, 0, 0, 0, 0, 0], 64, 'reserved'], // discard-only
  [[0x20, 0x01, 0, 0], 23, 'reserved'], // IETF protocol assignments, Teredo, ORCHID
  [[0x20, 0x01, 0x0d, 0xb8], 32, 'documentation'],
  [[0x3f, 0xff, 0], 20, 'documentation'], // 3fff::/20 (RFC 9637)
  [[0xfc, 0], 7, 'private'], // unique local, includes fd00:ec2::254 (metadata)
  [[0xfe, 0x80], 10, 'link-local'],
  [[0xfe, 0xc0], 10, 'reserved'], // site-local (deprecated)
  [[0xff], 8, 'multicast'],
];

function inRange(bytes: number[], prefix: number[], bits: number): boolean {
  for (let i = 0; i < bits; i += 8) {
    const take = Math.min(8, bits - i);
    const mask = (0xff << (8 - take)) & 0xff;
    if (((bytes[i / 8] ?? 0) & mask) !== ((prefix[i / 8] ?? 0) & mask)) return false;
  }
  return true;
}

function v4Bytes(address: string): number[] {
  return address.split('.').map(Number);
}

/** The 16 bytes of a textual IPv6 address (zone id ignored, embedded dotted quad allowed). */
export function v6Bytes(address: string): number[] {
  let a = address.replace(/%.*$/, '');
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(a);
  if (dotted) {
    const [b0, b1, b2, b3] = v4Bytes(dotted[1]);
    a = a.slice(0, -dotted[1].length) + `${((b0 << 8) | b1).toString(16)}:${((b2 << 8) | b3).toString(16)}`;
  }
  const [head, tail] = a.includes('::') ? a.split('::') : [a, undefined];
  const h = head ? head.split(':') : [];
  const t = tail === undefined ? [] : tail ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill('0'), ...t];
  return groups.flatMap((g) => {
    const n = parseInt(g, 16);
    return [n >> 8, n & 0xff];
  });
}

/**
 * Why an IP address must not be connected to (`"loopback"`, `"private"`, ...), or null when it
 * is globally routable. A string that is not an IP address is refused as `"not an IP address"`.
 */
export function nonPublicReason(address: string): string | null {
  const a = address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address;
  if (isIPv4(a)) {
    const bytes = v4Bytes(a);
    for (const [prefix, bits, kind] of V4) if (inRange(bytes, prefix, bits)) return kind;
    return null;
  }
  if (!isIPv6(a)) return 'not an IP address';
  const bytes = v6Bytes(a);
  for (const [prefix, bits, offset] of EMBEDDING) {
    if (inRange(bytes, prefix, bits)) {
      const inner = bytes.slice(offset, offset + 4).join('.');
      const reason = nonPublicReason(inner);
      return reason ? `${reason} (${inner} inside ${a})` : null;
    }
  }
  for (const [prefix, bits, kind] of V6) if (inRange(bytes, prefix, bits)) return kind;
  // Global unicast is 2000::/3; everything else is reserved or unassigned.
  if (!inRange(bytes, [0x20], 3)) return 'reserved';
  return null;
}

export function isIpLiteral(host: string): boolean {
  const h = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  return isIP(h) !== 0;
}
