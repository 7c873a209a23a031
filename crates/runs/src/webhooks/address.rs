//! The server-side request forgery rule: which addresses a webhook may reach, and the resolver
//! that enforces it.
//!
//! A subscription without `allow_private` is refused when ANY address its host resolves to is
//! loopback, private (RFC 1918, unique local `fc00::/7`, site-local `fec0::/10`), link-local
//! (`169.254.0.0/16` with the cloud metadata address, `fe80::/10`), unspecified or "this
//! network" (`0.0.0.0/8`), shared (CGNAT `100.64.0.0/10`), multicast or broadcast, including
//! the IPv4-mapped (`::ffff:0:0/96`), IPv4-compatible and NAT64 (`64:ff9b::/96`) forms of these.
//! The client connects only to the addresses this resolver returned, so a second lookup (DNS
//! rebinding) never happens.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Why an address may not be reached, or `None` when it may.
pub fn forbidden(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => forbidden_v6(v6),
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, _, _] = ip.octets();
    Some(match (a, b) {
        (0, _) => "unspecified (0.0.0.0/8)",
        (127, _) => "loopback",
        (10, _) => "private (RFC 1918)",
        (172, 16..=31) => "private (RFC 1918)",
        (192, 168) => "private (RFC 1918)",
        (169, 254) => "link-local (cloud metadata lives here)",
        (100, 64..=127) => "shared address space (CGNAT 100.64.0.0/10)",
        (224..=239, _) => "multicast",
        _ if ip.is_broadcast() => "broadcast",
        _ => return None,
    })
}

fn forbidden_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    if ip.is_unspecified() {
        return Some("unspecified");
    }
    if ip.is_loopback() {
        return Some("loopback");
    }
    // An IPv4 address in IPv6 clothing is judged as the IPv4 address: mapped (::ffff:a.b.c.d),
    // compatible (::a.b.c.d, deprecated but still routed by some stacks) and NAT64
    // (64:ff9b::a.b.c.d), which a NAT64 gateway forwards to the IPv4 address.
    let embedded =
        |s: &[u16; 8]| Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    if s[..5] == [0; 5] && (s[5] == 0xffff || s[5] == 0) {
        return forbidden_v4(embedded(&s));
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return forbidden_v4(embedded(&s));
    }
    Some(match s[0] {
        x if x & 0xfe00 == 0xfc00 => "unique local (fc00::/7)",
        x if x & 0xffc0 == 0xfe80 => "link-local (fe80::/10)",
        x if x & 0xffc0 == 0xfec0 => "site-local (fec0::/10)",
        x if x & 0xff00 == 0xff00 => "multicast",
        _ => return None,
    })
}

/// A refusal: the host, the address and why.
#[derive(Debug, thiserror::Error)]
#[error("refused: {host} resolves to {ip}, which is {why}; set allow_private = true on the subscription to allow it")]
pub struct Refused {
    pub host: String,
    pub ip: IpAddr,
    pub why: &'static str,
}

/// The addresses a host may be reached at: every address it resolves to, or a refusal if any
/// of them is forbidden (unless `allow_private`).
pub fn check(
    host: &str,
    addrs: Vec<SocketAddr>,
    allow_private: bool,
) -> Result<Vec<SocketAddr>, Refused> {
    if !allow_private {
        for addr in &addrs {
            if let Some(why) = forbidden(addr.ip()) {
                return Err(Refused {
                    host: host.to_string(),
                    ip: addr.ip(),
                    why,
                });
            }
        }
    }
    Ok(addrs)
}

/// The resolver of a subscription's HTTP client: resolves with the system's resolver, then
/// applies `check`. The client connects only to what it returns.
pub struct Guard {
    pub allow_private: bool,
}

impl reqwest::dns::Resolve for Guard {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allow_private = self.allow_private;
        Box::pin(async move {
            let host = name.as_str().to_string();
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let addrs = check(&host, addrs, allow_private)?;
            let addrs: reqwest::dns::Addrs = Box::new(addrs.into_iter());
            Ok(addrs)
        })
    }
}

/// The refusal somewhere in an error's chain of sources, if the resolver refused.
pub fn refusal_in(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut current = Some(error);
    while let Some(e) = current {
        if let Some(refused) = e.downcast_ref::<Refused>() {
            return Some(refused.to_string());
        }
        current = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(s: &str) -> Option<&'static str> {
        forbidden(s.parse().expect("an address"))
    }

    #[test]
    fn every_forbidden_ipv4_range_is_refused_at_its_edges() {
        for ip in [
            "0.0.0.0",
            "0.255.255.255",
            "127.0.0.1",
            "127.255.255.254",
            "10.0.0.0",
            "10.255.255.255",
            "172.16.0.0",
            "172.31.255.255",
            "192.168.0.1",
            "192.168.255.255",
            "169.254.0.1",
            "169.254.169.254",
            "169.254.255.255",
            "100.64.0.0",
            "100.127.255.255",
            "224.0.0.1",
            "239.255.255.255",
            "255.255.255.255",
        ] {
            assert!(v4(ip).is_some(), "{ip} must be refused");
        }
    }

    #[test]
    fn public_ipv4_addresses_next_to_the_ranges_are_allowed() {
        for ip in [
            "1.1.1.1",
            "8.8.8.8",
            "9.255.255.255",
            "11.0.0.0",
            "172.15.255.255",
            "172.32.0.0",
            "192.167.255.255",
            "192.169.0.0",
            "169.253.255.255",
            "169.255.0.0",
            "100.63.255.255",
            "100.128.0.0",
            "126.255.255.255",
            "128.0.0.0",
            "223.255.255.255",
        ] {
            assert_eq!(v4(ip), None, "{ip} must be allowed");
        }
    }

    #[test]
    fn every_forbidden_ipv6_range_is_refused() {
        for ip in [
            "::",
            "::1",
            "fc00::1",
            "fd12:3456::1",
            "fdff:ffff::1",
            "fe80::1",
            "febf::1",
            "fec0::1",
            "ff02::1",
        ] {
            assert!(v4(ip).is_some(), "{ip} must be refused");
        }
        for ip in [
            "2001:4860:4860::8888",
            "2606:4700::1111",
            "fbff::1",
            "fe7f::1",
        ] {
            assert_eq!(v4(ip), None, "{ip} must be allowed");
        }
    }

    #[test]
    fn ipv4_in_ipv6_forms_are_judged_as_their_ipv4_address() {
        for ip in [
            "::ffff:127.0.0.1",
            "::ffff:10.1.2.3",
            "::ffff:169.254.169.254",
            "::ffff:100.64.0.1",
            "::ffff:192.168.1.1",
            "::ffff:0.0.0.0",
            "::127.0.0.1",
            "::10.0.0.1",
            "64:ff9b::169.254.169.254",
            "64:ff9b::a00:1",
        ] {
            assert!(v4(ip).is_some(), "{ip} must be refused");
        }
        for ip in ["::ffff:8.8.8.8", "64:ff9b::808:808", "::ffff:1.1.1.1"] {
            assert_eq!(v4(ip), None, "{ip} must be allowed");
        }
    }

    #[test]
    fn one_forbidden_address_among_public_ones_refuses_the_host() {
        let addrs: Vec<SocketAddr> = ["8.8.8.8:0", "10.0.0.1:0"]
            .iter()
            .map(|a| a.parse().expect("an address"))
            .collect();
        let refused = check("mixed.example", addrs.clone(), false).expect_err("refused");
        assert_eq!(refused.ip, "10.0.0.1".parse::<IpAddr>().expect("ip"));
        assert!(refused.to_string().contains("mixed.example"));
        assert_eq!(
            check("mixed.example", addrs.clone(), true).expect("allowed"),
            addrs
        );
    }
}
