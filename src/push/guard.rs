//! THE table of address ranges a push URL may not point into (`RANGES`), the names refused
//! without asking DNS (`NAMES`), and the unwrapping of IPv6 forms that carry an IPv4
//! address, so that `::ffff:127.0.0.1` is checked as `127.0.0.1`.
//!
//! Decisions: documentation and benchmarking ranges are refused (no real webhook lives
//! there; a test that uses them is probing). 6to4 (`2002::/16`) and Teredo (`2001::/32`)
//! are refused whole: both are deprecated, and what they reach depends on relays. The
//! well-known NAT64 prefix (`64:ff9b::/96`) is how IPv6-only clusters reach public IPv4
//! hosts, so its embedded IPv4 address is unwrapped and checked instead; the local-use
//! NAT64 prefix (`64:ff9b:1::/48`) is refused.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

/// One refused range and the reason a refusal names.
pub struct Range {
    pub net: IpNet,
    pub reason: &'static str,
}

const fn v4(a: u8, b: u8, c: u8, d: u8, len: u8, reason: &'static str) -> Range {
    Range {
        net: IpNet::V4(Ipv4Net::new_assert(Ipv4Addr::new(a, b, c, d), len)),
        reason,
    }
}

const fn v6(segments: [u16; 8], len: u8, reason: &'static str) -> Range {
    let [a, b, c, d, e, f, g, h] = segments;
    Range {
        net: IpNet::V6(Ipv6Net::new_assert(
            Ipv6Addr::new(a, b, c, d, e, f, g, h),
            len,
        )),
        reason,
    }
}

/// Every refused range. The first row that contains an address names the reason, so the
/// metadata addresses come before the ranges around them.
pub(crate) const RANGES: [Range; 32] = [
    v4(0, 0, 0, 0, 8, "unspecified address"),
    v4(10, 0, 0, 0, 8, "private address"),
    // Alibaba Cloud's metadata service, inside the carrier NAT range.
    v4(100, 100, 100, 200, 32, "cloud metadata address"),
    v4(100, 64, 0, 0, 10, "carrier-grade NAT address"),
    v4(127, 0, 0, 0, 8, "loopback address"),
    // AWS, GCP, Azure, OCI, DigitalOcean…
    v4(169, 254, 169, 254, 32, "cloud metadata address"),
    // AWS ECS task metadata and credentials.
    v4(169, 254, 170, 2, 32, "cloud metadata address"),
    v4(169, 254, 0, 0, 16, "link-local address"),
    v4(172, 16, 0, 0, 12, "private address"),
    v4(192, 0, 0, 0, 24, "IETF protocol assignment address"),
    v4(192, 0, 2, 0, 24, "documentation address"),
    v4(192, 88, 99, 0, 24, "6to4 relay address"),
    v4(192, 168, 0, 0, 16, "private address"),
    v4(198, 18, 0, 0, 15, "benchmarking address"),
    v4(198, 51, 100, 0, 24, "documentation address"),
    v4(203, 0, 113, 0, 24, "documentation address"),
    v4(224, 0, 0, 0, 4, "multicast address"),
    v4(255, 255, 255, 255, 32, "broadcast address"),
    v4(240, 0, 0, 0, 4, "reserved address"),
    v6([0, 0, 0, 0, 0, 0, 0, 0], 128, "unspecified address"),
    v6([0, 0, 0, 0, 0, 0, 0, 1], 128, "loopback address"),
    v6(
        [0x64, 0xff9b, 1, 0, 0, 0, 0, 0],
        48,
        "local-use NAT64 address",
    ),
    v6([0x100, 0, 0, 0, 0, 0, 0, 0], 64, "discard-only address"),
    v6([0x2001, 0x2, 0, 0, 0, 0, 0, 0], 48, "benchmarking address"),
    v6(
        [0x2001, 0xdb8, 0, 0, 0, 0, 0, 0],
        32,
        "documentation address",
    ),
    v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 32, "Teredo address"),
    v6([0x2002, 0, 0, 0, 0, 0, 0, 0], 16, "6to4 address"),
    // AWS's IPv6 metadata service, inside the unique-local range.
    v6(
        [0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254],
        128,
        "cloud metadata address",
    ),
    v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, "unique-local address"),
    v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, "link-local address"),
    // Deprecated, but still routed inside some networks.
    v6([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10, "site-local address"),
    v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, "multicast address"),
];

/// How a name is matched in `NAMES`.
pub enum NameMatch {
    /// The name itself.
    Exact(&'static str),
    /// The name or any name under it.
    Under(&'static str),
}

/// Names refused before any DNS query: they name the gateway's own host or its cloud's
/// internals whatever a resolver answers.
pub const NAMES: [(NameMatch, &str); 6] = [
    (NameMatch::Under("localhost"), "localhost name"),
    (NameMatch::Exact("localhost.localdomain"), "localhost name"),
    (NameMatch::Exact("metadata"), "cloud metadata name"),
    (NameMatch::Exact("instance-data"), "cloud metadata name"),
    // metadata.google.internal, ec2.internal, … (a TLD reserved for private use).
    (NameMatch::Under("internal"), "internal name"),
    // RFC 8375: names of home networks.
    (NameMatch::Under("home.arpa"), "private network name"),
];

/// Why an address is refused, if it is: the reason of the first row containing it, after
/// unwrapping the IPv4 address an IPv6 form carries.
pub(crate) fn refused_address(ip: IpAddr) -> Option<&'static str> {
    let ip = unwrap_v4(ip);
    RANGES
        .iter()
        .find(|range| range.net.contains(&ip))
        .map(|range| range.reason)
}

/// The IPv4 address inside an IPv4-mapped (`::ffff:a.b.c.d`), IPv4-translated
/// (`::ffff:0:a.b.c.d`, RFC 2765: translators deliver it to the IPv4 address),
/// IPv4-compatible (`::a.b.c.d`, but not `::` or `::1`) or well-known NAT64
/// (`64:ff9b::a.b.c.d`) address; any other address as it is.
pub(crate) fn unwrap_v4(ip: IpAddr) -> IpAddr {
    let IpAddr::V6(v6) = ip else {
        return ip;
    };
    if let Some(v4) = v6.to_ipv4_mapped() {
        return IpAddr::V4(v4);
    }
    let s = v6.segments();
    let low = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    let compatible = s[..6] == [0; 6] && (s[6] != 0 || s[7] > 1);
    let nat64 = s[..6] == [0x64, 0xff9b, 0, 0, 0, 0];
    let translated = s[..6] == [0, 0, 0, 0, 0xffff, 0];
    if compatible || nat64 || translated {
        IpAddr::V4(low)
    } else {
        ip
    }
}

/// Why a name (lowercase, without trailing dot) is refused without resolving it, if it is.
pub(crate) fn refused_name(name: &str) -> Option<&'static str> {
    let listed = NAMES.iter().find(|(rule, _)| match rule {
        NameMatch::Exact(exact) => name == *exact,
        NameMatch::Under(parent) => {
            name == *parent
                || name
                    .strip_suffix(parent)
                    .is_some_and(|child| child.ends_with('.'))
        }
    });
    match listed {
        Some((_, reason)) => Some(reason),
        // Resolved through the gateway's search domains: inside its own cluster.
        None if !name.contains('.') => Some("single-label name"),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One address inside each row of `RANGES`, and the reason it must get.
    const INSIDE: [(&str, &str); 32] = [
        ("0.1.2.3", "unspecified address"),
        ("10.200.3.4", "private address"),
        ("100.100.100.200", "cloud metadata address"),
        ("100.127.255.254", "carrier-grade NAT address"),
        ("127.255.0.1", "loopback address"),
        ("169.254.169.254", "cloud metadata address"),
        ("169.254.170.2", "cloud metadata address"),
        ("169.254.1.1", "link-local address"),
        ("172.31.255.255", "private address"),
        ("192.0.0.170", "IETF protocol assignment address"),
        ("192.0.2.10", "documentation address"),
        ("192.88.99.1", "6to4 relay address"),
        ("192.168.1.1", "private address"),
        ("198.19.255.1", "benchmarking address"),
        ("198.51.100.7", "documentation address"),
        ("203.0.113.9", "documentation address"),
        ("239.255.255.250", "multicast address"),
        ("255.255.255.255", "broadcast address"),
        ("240.0.0.1", "reserved address"),
        ("::", "unspecified address"),
        ("::1", "loopback address"),
        ("64:ff9b:1::a00:1", "local-use NAT64 address"),
        ("100::1", "discard-only address"),
        ("2001:2::5", "benchmarking address"),
        ("2001:db8::1", "documentation address"),
        ("2001:0:4136:e378::1", "Teredo address"),
        ("2002:c000:204::1", "6to4 address"),
        ("fd00:ec2::254", "cloud metadata address"),
        ("fd12:3456::1", "unique-local address"),
        ("fe80::1", "link-local address"),
        ("fec0::1", "site-local address"),
        ("ff02::1", "multicast address"),
    ];

    #[test]
    fn every_row_refuses_its_addresses_with_its_reason() {
        for (row, (addr, reason)) in RANGES.iter().zip(INSIDE) {
            let ip: IpAddr = addr.parse().unwrap();
            assert!(row.net.contains(&ip), "{addr} is not in {}", row.net);
            assert_eq!(refused_address(ip), Some(reason), "{addr}");
            assert_eq!(row.reason, reason, "{}", row.net);
        }
    }

    #[test]
    fn the_first_and_last_address_of_each_row_is_refused_and_its_neighbours_checked() {
        for row in &RANGES {
            for edge in [row.net.network(), row.net.broadcast()] {
                assert!(refused_address(edge).is_some(), "{edge} in {}", row.net);
            }
        }
        // Just outside the private and carrier NAT ranges.
        for public in [
            "172.15.255.255",
            "172.32.0.0",
            "100.63.255.255",
            "100.128.0.0",
        ] {
            assert_eq!(refused_address(public.parse().unwrap()), None, "{public}");
        }
    }

    #[test]
    fn public_addresses_pass() {
        for addr in [
            "8.8.8.8",
            "1.1.1.1",
            "93.184.215.14",
            "2606:4700::1111",
            "2a00:1450:4001::200e",
            "64:ff9b::808:808",
            "::ffff:8.8.8.8",
        ] {
            assert_eq!(refused_address(addr.parse().unwrap()), None, "{addr}");
        }
    }

    #[test]
    fn ipv6_forms_carrying_ipv4_are_checked_as_ipv4() {
        for (addr, reason) in [
            ("::ffff:127.0.0.1", "loopback address"),
            ("::ffff:7f00:1", "loopback address"),
            ("::ffff:169.254.169.254", "cloud metadata address"),
            ("::127.0.0.1", "loopback address"),
            ("::10.0.0.1", "private address"),
            ("64:ff9b::127.0.0.1", "loopback address"),
            ("::ffff:0:a9fe:a9fe", "cloud metadata address"),
            ("::ffff:0:7f00:1", "loopback address"),
            ("64:ff9b::192.168.0.1", "private address"),
            ("::ffff:0.0.0.0", "unspecified address"),
        ] {
            assert_eq!(
                refused_address(addr.parse().unwrap()),
                Some(reason),
                "{addr}"
            );
        }
    }

    #[test]
    fn listed_and_single_label_names_are_refused() {
        for (name, reason) in [
            ("localhost", "localhost name"),
            ("a.b.localhost", "localhost name"),
            ("localhost.localdomain", "localhost name"),
            ("metadata", "cloud metadata name"),
            ("instance-data", "cloud metadata name"),
            ("metadata.google.internal", "internal name"),
            ("ec2.internal", "internal name"),
            ("printer.home.arpa", "private network name"),
            ("kubernetes", "single-label name"),
        ] {
            assert_eq!(refused_name(name), Some(reason), "{name}");
        }
        for name in [
            "notlocalhost.example",
            "hooks.example.com",
            "internal.example",
        ] {
            assert_eq!(refused_name(name), None, "{name}");
        }
    }
}
