//! Which addresses the fetcher may connect to: public unicast only.
//!
//! Table-driven so the ranges can be read against the IANA special-purpose registries.
//! Forms of IPv6 that carry an IPv4 address (mapped, compatible, NAT64, 6to4, Teredo)
//! are judged by the IPv4 address they carry, since that is where the packets may go.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// IPv4 ranges that are never fetched: (network, prefix length, reason).
/// Order matters only where ranges nest (broadcast before 240/4).
const BLOCKED_V4: &[(Ipv4Addr, u8, &str)] = &[
    (
        Ipv4Addr::new(0, 0, 0, 0),
        8,
        "unspecified (\"this network\")",
    ),
    (Ipv4Addr::new(10, 0, 0, 0), 8, "private"),
    (
        Ipv4Addr::new(100, 64, 0, 0),
        10,
        "shared address space (CGNAT)",
    ),
    (Ipv4Addr::new(127, 0, 0, 0), 8, "loopback"),
    (Ipv4Addr::new(169, 254, 0, 0), 16, "link-local"),
    (Ipv4Addr::new(172, 16, 0, 0), 12, "private"),
    (
        Ipv4Addr::new(192, 0, 0, 0),
        24,
        "reserved (IETF protocol assignments)",
    ),
    (Ipv4Addr::new(192, 0, 2, 0), 24, "documentation"),
    (Ipv4Addr::new(192, 31, 196, 0), 24, "reserved (AS112)"),
    (Ipv4Addr::new(192, 52, 193, 0), 24, "reserved (AMT)"),
    (
        Ipv4Addr::new(192, 88, 99, 0),
        24,
        "reserved (6to4 relay anycast)",
    ),
    (Ipv4Addr::new(192, 168, 0, 0), 16, "private"),
    (Ipv4Addr::new(192, 175, 48, 0), 24, "reserved (AS112)"),
    (Ipv4Addr::new(198, 18, 0, 0), 15, "benchmarking"),
    (Ipv4Addr::new(198, 51, 100, 0), 24, "documentation"),
    (Ipv4Addr::new(203, 0, 113, 0), 24, "documentation"),
    (Ipv4Addr::new(224, 0, 0, 0), 4, "multicast"),
    (Ipv4Addr::new(255, 255, 255, 255), 32, "broadcast"),
    (Ipv4Addr::new(240, 0, 0, 0), 4, "reserved"),
];

/// IPv6 ranges refused outright (the IPv4-carrying forms are handled in `check_v6`).
const BLOCKED_V6: &[(Ipv6Addr, u8, &str)] = &[
    (Ipv6Addr::UNSPECIFIED, 128, "unspecified"),
    (Ipv6Addr::LOCALHOST, 128, "loopback"),
    // Local-use NAT64 (RFC 8215): translates into the operator's own network, and the
    // IPv4 position depends on a prefix length we cannot know, so refuse all of it.
    (
        Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, 0, 0),
        48,
        "local-use NAT64",
    ),
    (
        Ipv6Addr::new(0x100, 0, 0, 0, 0, 0, 0, 0),
        64,
        "reserved (discard-only)",
    ),
    (
        Ipv6Addr::new(0x2001, 0x2, 0, 0, 0, 0, 0, 0),
        48,
        "benchmarking",
    ),
    (
        Ipv6Addr::new(0x2001, 0x10, 0, 0, 0, 0, 0, 0),
        28,
        "reserved (ORCHID)",
    ),
    (
        Ipv6Addr::new(0x2001, 0x20, 0, 0, 0, 0, 0, 0),
        28,
        "reserved (ORCHIDv2)",
    ),
    (
        Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0),
        32,
        "documentation",
    ),
    (
        Ipv6Addr::new(0x3fff, 0, 0, 0, 0, 0, 0, 0),
        20,
        "documentation",
    ),
    (
        Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0),
        7,
        "private (unique local)",
    ),
    (Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), 10, "link-local"),
    (
        Ipv6Addr::new(0xfec0, 0, 0, 0, 0, 0, 0, 0),
        10,
        "site-local (deprecated)",
    ),
    (Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0), 8, "multicast"),
];

/// `Ok` when the fetcher may connect to `ip`; otherwise why not (safe to show a client).
pub fn check_ip(ip: IpAddr) -> Result<(), &'static str> {
    match ip {
        IpAddr::V4(v4) => check_v4(v4),
        IpAddr::V6(v6) => check_v6(v6),
    }
}

fn check_v4(ip: Ipv4Addr) -> Result<(), &'static str> {
    let bits = u32::from(ip);
    for &(net, len, reason) in BLOCKED_V4 {
        if prefix_v4(bits, len) == prefix_v4(u32::from(net), len) {
            return Err(reason);
        }
    }
    Ok(())
}

fn check_v6(ip: Ipv6Addr) -> Result<(), &'static str> {
    let bits = u128::from(ip);
    for &(net, len, reason) in BLOCKED_V6 {
        if prefix_v6(bits, len) == prefix_v6(u128::from(net), len) {
            return Err(reason);
        }
    }
    let seg = ip.segments();
    // The low 32 bits as IPv4, the usual position for an embedded address.
    let low_v4 = Ipv4Addr::from((bits & 0xffff_ffff) as u32);

    // ::ffff:a.b.c.d (IPv4-mapped): a dual-stack socket connects to a.b.c.d itself.
    if bits >> 32 == 0xffff {
        return check_v4(low_v4).map_err(|_| "IPv4-mapped form of a non-public IPv4 address");
    }
    // ::ffff:0:a.b.c.d (IPv4-translated, RFC 2765).
    if bits >> 32 == 0xffff_0000 {
        return check_v4(low_v4)
            .map_err(|_| "IPv4-translated form of a non-public IPv4 address")
            .and(Err("reserved (IPv4-translated)"));
    }
    // ::a.b.c.d (IPv4-compatible, deprecated; never routable today).
    if bits >> 32 == 0 {
        return check_v4(low_v4)
            .map_err(|_| "IPv4-compatible form of a non-public IPv4 address")
            .and(Err("reserved (IPv4-compatible, deprecated)"));
    }
    // 64:ff9b::/96 well-known NAT64: the translator forwards to the embedded address.
    if bits >> 32 == 0x0064_ff9b_0000_0000_0000_0000 {
        return check_v4(low_v4).map_err(|_| "NAT64 form of a non-public IPv4 address");
    }
    // 2002:V4HI:V4LO::/48 (6to4): the relay forwards to the embedded address.
    if seg[0] == 0x2002 {
        let embedded = Ipv4Addr::from(((seg[1] as u32) << 16) | seg[2] as u32);
        return check_v4(embedded).map_err(|_| "6to4 form of a non-public IPv4 address");
    }
    // 2001:0::/32 (Teredo): server address in bits 32..64, client address inverted in
    // the low 32 bits; either one pointing inside would let the tunnel reach it.
    if seg[0] == 0x2001 && seg[1] == 0 {
        let server = Ipv4Addr::from(((seg[2] as u32) << 16) | seg[3] as u32);
        let client = Ipv4Addr::from(!u32::from(low_v4));
        check_v4(client).map_err(|_| "Teredo form of a non-public IPv4 address")?;
        return check_v4(server).map_err(|_| "Teredo form of a non-public IPv4 address");
    }
    // Only 2000::/3 is allocated as global unicast; everything else is reserved.
    if seg[0] & 0xe000 != 0x2000 {
        return Err("reserved");
    }
    Ok(())
}

fn prefix_v4(bits: u32, len: u8) -> u32 {
    // checked_shr: a shift by the full width (len 0) would overflow; it matches all.
    bits.checked_shr(32 - u32::from(len)).unwrap_or(0)
}

fn prefix_v6(bits: u128, len: u8) -> u128 {
    bits.checked_shr(128 - u32::from(len)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocked_ipv4_ranges_are_refused() {
        let cases = [
            ("0.0.0.0", "unspecified"),
            ("0.1.2.3", "unspecified"),
            ("10.0.0.1", "private"),
            ("10.255.255.255", "private"),
            ("100.64.0.1", "CGNAT"),
            ("100.127.255.254", "CGNAT"),
            ("127.0.0.1", "loopback"),
            ("127.255.255.254", "loopback"),
            ("169.254.169.254", "link-local"),
            ("172.16.0.1", "private"),
            ("172.31.255.255", "private"),
            ("192.0.0.8", "reserved"),
            ("192.0.2.1", "documentation"),
            ("192.88.99.1", "reserved"),
            ("192.168.1.1", "private"),
            ("198.18.0.1", "benchmarking"),
            ("198.19.255.255", "benchmarking"),
            ("198.51.100.7", "documentation"),
            ("203.0.113.9", "documentation"),
            ("224.0.0.1", "multicast"),
            ("239.255.255.250", "multicast"),
            ("240.0.0.1", "reserved"),
            ("255.255.255.254", "reserved"),
            ("255.255.255.255", "broadcast"),
        ];
        for (addr, want) in cases {
            let ip: IpAddr = addr.parse().expect("test address");
            match check_ip(ip) {
                Err(reason) => assert!(reason.contains(want), "{addr}: {reason} lacks {want}"),
                Ok(()) => panic!("{addr} should be refused"),
            }
        }
    }

    #[test]
    fn blocked_ipv6_ranges_and_ipv4_carrying_forms_are_refused() {
        let cases = [
            ("::", "unspecified"),
            ("::1", "loopback"),
            ("fc00::1", "private"),
            ("fd12:3456::1", "private"),
            ("fe80::1", "link-local"),
            ("febf::1", "link-local"),
            ("fec0::1", "site-local"),
            ("ff02::1", "multicast"),
            ("2001:db8::1", "documentation"),
            ("3fff::1", "documentation"),
            ("2001:2::1", "benchmarking"),
            ("2001:10::1", "ORCHID"),
            ("100::1", "discard"),
            ("5f00::1", "reserved"),
            ("4000::1", "reserved"),
            // IPv4-mapped
            ("::ffff:127.0.0.1", "IPv4-mapped"),
            ("::ffff:10.0.0.1", "IPv4-mapped"),
            ("::ffff:169.254.169.254", "IPv4-mapped"),
            ("::ffff:192.168.0.1", "IPv4-mapped"),
            ("::ffff:0.0.0.0", "IPv4-mapped"),
            // IPv4-translated and IPv4-compatible, blocked whatever they carry
            ("::ffff:0:10.0.0.1", "IPv4-translated"),
            ("::ffff:0:8.8.8.8", "reserved"),
            ("::127.0.0.1", "IPv4-compatible"),
            ("::10.0.0.1", "IPv4-compatible"),
            ("::8.8.8.8", "reserved"),
            // NAT64
            ("64:ff9b::127.0.0.1", "NAT64"),
            ("64:ff9b::10.0.0.1", "NAT64"),
            ("64:ff9b::a9fe:a9fe", "NAT64"),
            ("64:ff9b:1::8.8.8.8", "local-use NAT64"),
            ("64:ff9b:1:ffff::1", "local-use NAT64"),
            // 6to4: 2002:7f00:0001:: carries 127.0.0.1, 2002:0a00:0001:: carries 10.0.0.1
            ("2002:7f00:1::1", "6to4"),
            ("2002:a00:1::", "6to4"),
            ("2002:c0a8:101::1", "6to4"),
            ("2002:a9fe:a9fe::1", "6to4"),
            // Teredo: client address is the inverted low 32 bits.
            // !127.0.0.1 = 0x80ff_fffe; !10.0.0.1 = 0xf5ff_fffe
            ("2001:0:4136:e378:8000:63bf:80ff:fffe", "Teredo"),
            ("2001:0:4136:e378:8000:63bf:f5ff:fffe", "Teredo"),
            // Teredo with a private server address (10.0.0.1) and a public client
            ("2001:0:a00:1:8000:63bf:f7f7:f7f7", "Teredo"),
        ];
        for (addr, want) in cases {
            let ip: IpAddr = addr.parse().expect("test address");
            match check_ip(ip) {
                Err(reason) => assert!(reason.contains(want), "{addr}: {reason} lacks {want}"),
                Ok(()) => panic!("{addr} should be refused"),
            }
        }
    }

    #[test]
    fn public_addresses_pass() {
        let cases = [
            "8.8.8.8",
            "1.1.1.1",
            "93.184.216.34",
            "100.63.255.255",  // just below CGNAT
            "100.128.0.0",     // just above CGNAT
            "172.15.255.255",  // just below 172.16/12
            "172.32.0.0",      // just above 172.16/12
            "192.0.3.1",       // next to documentation
            "198.17.255.255",  // just below benchmarking
            "198.20.0.0",      // just above benchmarking
            "223.255.255.255", // just below multicast
            "2606:4700::1111",
            "2001:4860:4860::8888",
            "2a00:1450:4001::1",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
            // Teredo with public server 65.54.227.120 and public client 8.8.8.8
            "2001:0:4136:e378:8000:63bf:f7f7:f7f7",
        ];
        for addr in cases {
            let ip: IpAddr = addr.parse().expect("test address");
            assert_eq!(check_ip(ip), Ok(()), "{addr} should pass");
        }
    }
}
