//! `server.trusted_proxies`: the addresses (single IPs or CIDR blocks) of the reverse proxies
//! whose `X-Forwarded-For` / `Forwarded` headers name the client. Parsed and checked here; the
//! HTTP edge asks `TrustedProxies::contains` of a peer and of each forwarded hop. Empty by
//! default: no forwarded address is believed unless the operator names the proxy.

use std::net::IpAddr;

use crate::error::Error;

/// The reverse proxies whose forwarded client addresses are believed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies {
    blocks: Vec<Block>,
}

/// One CIDR block: the address with its host bits cleared, and the prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Block {
    network: IpAddr,
    prefix: u8,
}

impl TrustedProxies {
    /// Whether no proxy is trusted (the peer's address is always the client's).
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// Whether `ip` is one of the trusted proxies. An IPv4 address mapped into IPv6
    /// (`::ffff:10.0.0.1`, as a dual-stack listener reports an IPv4 peer) is compared as IPv4.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.blocks.iter().any(|b| b.contains(ip))
    }
}

impl Block {
    fn contains(self, ip: IpAddr) -> bool {
        match (self.network, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                mask_v4(u32::from(ip), self.prefix) == u32::from(net)
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                mask_v6(u128::from(ip), self.prefix) == u128::from(net)
            }
            _ => false,
        }
    }

    /// `text` as an address (a /32 or /128) or `address/prefix`.
    fn parse(text: &str) -> Option<Block> {
        let (addr, prefix) = match text.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (text, None),
        };
        let addr: IpAddr = addr.parse().ok()?;
        let addr = addr.to_canonical();
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            // Digits only: `u8::from_str` would take a leading `+`.
            Some(p) if !p.is_empty() && p.len() <= 3 && p.bytes().all(|b| b.is_ascii_digit()) => {
                p.parse::<u8>().ok().filter(|p| *p <= max)?
            }
            Some(_) => return None,
        };
        let network = match addr {
            IpAddr::V4(a) => IpAddr::V4(mask_v4(u32::from(a), prefix).into()),
            IpAddr::V6(a) => IpAddr::V6(mask_v6(u128::from(a), prefix).into()),
        };
        Some(Block { network, prefix })
    }
}

fn mask_v4(addr: u32, prefix: u8) -> u32 {
    match prefix {
        0 => 0,
        p => addr & (u32::MAX << (32 - u32::from(p))),
    }
}

fn mask_v6(addr: u128, prefix: u8) -> u128 {
    match prefix {
        0 => 0,
        p => addr & (u128::MAX << (128 - u32::from(p))),
    }
}

/// `server.trusted_proxies`, default empty; an entry that is neither an IP address nor a CIDR
/// block is refused naming the field and the entry.
pub(crate) fn trusted_proxies(entries: Option<Vec<String>>) -> Result<TrustedProxies, Error> {
    TrustedProxies::parse(&entries.unwrap_or_default())
}

impl TrustedProxies {
    /// The proxies `entries` name, as `server.trusted_proxies` lists them.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<TrustedProxies, Error> {
        let mut blocks = Vec::with_capacity(entries.len());
        for (i, entry) in entries.iter().enumerate() {
            let entry = entry.as_ref();
            let block = Block::parse(entry.trim()).ok_or_else(|| {
                Error::Invalid(format!(
                    "server.trusted_proxies[{i}]: {entry:?} is not an IP address or a CIDR \
                     block like 10.0.0.0/8 or fd00::/8"
                ))
            })?;
            blocks.push(block);
        }
        Ok(TrustedProxies { blocks })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::load_text;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("an address")
    }

    #[test]
    fn addresses_and_blocks_are_matched() {
        let config = load_text(
            "[server]\ntrusted_proxies = [\"10.1.2.3\", \"192.168.0.0/16\", \"fd00::/8\"]\n",
        )
        .expect("valid");
        let proxies = &config.trusted_proxies;
        assert!(proxies.contains(ip("10.1.2.3")));
        assert!(!proxies.contains(ip("10.1.2.4")));
        assert!(proxies.contains(ip("192.168.200.1")));
        assert!(!proxies.contains(ip("192.169.0.1")));
        assert!(proxies.contains(ip("fd12::1")));
        assert!(!proxies.contains(ip("fe80::1")));
        // A dual-stack listener reports IPv4 peers mapped into IPv6.
        assert!(proxies.contains(ip("::ffff:10.1.2.3")));
    }

    #[test]
    fn none_is_trusted_by_default() {
        let config = load_text("").expect("valid");
        assert!(config.trusted_proxies.is_empty());
        assert!(!config.trusted_proxies.contains(ip("127.0.0.1")));
    }

    #[test]
    fn a_bad_entry_is_refused_naming_the_field() {
        for bad in [
            "\"10.0.0.0/33\"",
            "\"10.0.0\"",
            "\"proxy.example\"",
            "\"10.0.0.0/\"",
            "\"10.0.0.0/+8\"",
            "\"::/129\"",
        ] {
            let text = format!("[server]\ntrusted_proxies = [\"127.0.0.1\", {bad}]\n");
            let error = load_text(&text).expect_err(bad).to_string();
            assert!(
                error.contains("server.trusted_proxies[1]"),
                "{bad}: {error}"
            );
        }
    }

    #[test]
    fn the_whole_address_space_may_be_trusted() {
        let config =
            load_text("[server]\ntrusted_proxies = [\"0.0.0.0/0\", \"::/0\"]\n").expect("valid");
        assert!(config.trusted_proxies.contains(ip("8.8.8.8")));
        assert!(config.trusted_proxies.contains(ip("2001:db8::1")));
    }
}
