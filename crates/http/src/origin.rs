//! The origin of a request, recorded beside every event it causes: the authenticated key as it
//! is now (id, name, kind, team, admin), the channel, the request id the middleware made, the
//! client's address and its user agent. Built once per request, after authentication; it
//! decides nothing about access.
//!
//! What is believed: the key and the request id are the service's own. The channel `console`
//! is the service's own too (the request was authenticated by a console session, not a bearer
//! key); `api` and `cli` are the client's claim (`X-Runledger-Client: cli`, which the
//! `runledger` command line sends), kept apart only for the record. The client address is the
//! TCP peer's, unless the peer is one of `server.trusted_proxies`: then the right-most address
//! of the forwarding header that is not itself a trusted proxy, so that a client behind the
//! proxy cannot put another address in front of its own. A header that does not parse is
//! ignored as a whole (the peer is recorded), and so are both when a request carries both
//! `X-Forwarded-For` and `Forwarded`: the one a proxy did not write is the client's.

use std::net::{IpAddr, SocketAddr};

use actix_web::http::header::{self, HeaderValue};
use actix_web::HttpRequest;

use super::problem::REQUEST;
use runledger_config::TrustedProxies;
use runledger_domain::origin::{cut, MAX_USER_AGENT};
use runledger_domain::{Channel, Origin, OriginKey};
use runledger_runs::api_keys::Key;

/// The header the `runledger` command line sends with every request, naming itself.
pub const CLIENT_HEADER: &str = "x-runledger-client";

/// The origin of `req`, authenticated as `key`.
pub(crate) fn of(req: &HttpRequest, key: &Key, proxies: &TrustedProxies) -> Origin {
    Origin {
        channel: channel(req),
        key: Some(OriginKey {
            id: key.id.clone(),
            name: key.name.clone(),
            kind: key.kind.as_str().to_string(),
            team: key.team.clone(),
            admin: key.admin,
        }),
        request_id: REQUEST.try_with(|(id, _)| id.clone()).ok(),
        client_addr: client_addr(req.peer_addr(), req.headers(), proxies).map(|ip| ip.to_string()),
        user_agent: user_agent(req.headers()),
        cause: None,
        reason: None,
    }
}

/// `console` for a request authenticated by a console session (it has no `Authorization`
/// header, see `auth`); `cli` when the request says it comes from the command line; else `api`.
fn channel(req: &HttpRequest) -> Channel {
    let headers = req.headers();
    if !headers.contains_key(header::AUTHORIZATION) {
        return Channel::Console;
    }
    let mut claims = headers.get_all(CLIENT_HEADER);
    match (claims.next(), claims.next()) {
        (Some(v), None) if v.as_bytes().eq_ignore_ascii_case(b"cli") => Channel::Cli,
        _ => Channel::Api,
    }
}

/// The client's `User-Agent`, cut to `MAX_USER_AGENT` bytes at a character boundary; none when
/// absent, blank or not UTF-8. (A header value holds no control character but tab.)
fn user_agent(headers: &header::HeaderMap) -> Option<String> {
    let agent = std::str::from_utf8(headers.get(header::USER_AGENT)?.as_bytes()).ok()?;
    let agent = cut(agent.trim(), MAX_USER_AGENT);
    (!agent.is_empty()).then(|| agent.to_string())
}

/// The client's address: the peer's, or for a trusted proxy's request the one it forwarded.
fn client_addr(
    peer: Option<SocketAddr>,
    headers: &header::HeaderMap,
    proxies: &TrustedProxies,
) -> Option<IpAddr> {
    let peer = peer?.ip().to_canonical();
    if proxies.is_empty() || !proxies.contains(peer) {
        return Some(peer);
    }
    Some(forwarded(headers, proxies).unwrap_or(peer))
}

/// The right-most hop of the one forwarding header that is not a trusted proxy (or, when every
/// hop is one, the left-most); `None` when there is no such header, both, or one that does not
/// parse.
fn forwarded(headers: &header::HeaderMap, proxies: &TrustedProxies) -> Option<IpAddr> {
    let x_forwarded_for: Vec<&HeaderValue> = headers.get_all("x-forwarded-for").collect();
    let forwarded: Vec<&HeaderValue> = headers.get_all(header::FORWARDED).collect();
    let hops = match (x_forwarded_for.is_empty(), forwarded.is_empty()) {
        (false, true) => hops(&x_forwarded_for, x_forwarded_for_hop)?,
        (true, false) => hops(&forwarded, forwarded_hop)?,
        _ => return None,
    };
    hops.iter()
        .rev()
        .find(|hop| !proxies.contains(**hop))
        .or(hops.first())
        .copied()
}

/// Every hop of a forwarding header's lines, in order; `None` if any does not parse. Several
/// lines of a header are one comma-separated list (RFC 9110 §5.3).
fn hops(lines: &[&HeaderValue], hop: fn(&str) -> Option<IpAddr>) -> Option<Vec<IpAddr>> {
    let mut hops = Vec::new();
    for line in lines {
        for element in line.to_str().ok()?.split(',') {
            hops.push(hop(element.trim())?.to_canonical());
        }
    }
    (!hops.is_empty()).then_some(hops)
}

/// One hop of `X-Forwarded-For`: an address, with a port for the proxies that add one.
fn x_forwarded_for_hop(text: &str) -> Option<IpAddr> {
    text.parse::<IpAddr>()
        .ok()
        .or_else(|| text.parse::<SocketAddr>().ok().map(|a| a.ip()))
}

/// The `for=` of one element of `Forwarded` (RFC 7239): an address, quoted or not, an IPv6
/// one in brackets, with or without a port. `unknown` and obfuscated names are no address.
fn forwarded_hop(element: &str) -> Option<IpAddr> {
    let mut found = None;
    for pair in element.split(';') {
        let (name, value) = pair.trim().split_once('=')?;
        if !name.trim().eq_ignore_ascii_case("for") {
            continue;
        }
        if found.is_some() {
            return None;
        }
        let value = value.trim();
        let value = match value.strip_prefix('"') {
            Some(quoted) => quoted.strip_suffix('"')?,
            None => value,
        };
        let address = match value.strip_prefix('[') {
            Some(v6) => v6
                .split_once(']')?
                .0
                .parse::<std::net::Ipv6Addr>()
                .ok()?
                .into(),
            None => x_forwarded_for_hop(value)?,
        };
        found = Some(address);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::http::header::{HeaderMap, HeaderName};

    fn proxies(list: &[&str]) -> TrustedProxies {
        TrustedProxies::parse(list).expect("valid")
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).expect("a name"),
                HeaderValue::from_str(value).expect("a value"),
            );
        }
        map
    }

    fn addr(peer: &str, pairs: &[(&str, &str)], trusted: &[&str]) -> Option<String> {
        let peer: SocketAddr = peer.parse().expect("a peer");
        client_addr(Some(peer), &headers(pairs), &proxies(trusted)).map(|ip| ip.to_string())
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_forwards() {
        let spoof = [("x-forwarded-for", "203.0.113.9")];
        assert_eq!(
            addr("198.51.100.1:5000", &spoof, &[]).as_deref(),
            Some("198.51.100.1")
        );
        assert_eq!(
            addr("198.51.100.1:5000", &spoof, &["10.0.0.0/8"]).as_deref(),
            Some("198.51.100.1")
        );
    }

    #[test]
    fn behind_a_trusted_proxy_the_right_most_untrusted_hop_is_believed() {
        let trusted = ["10.0.0.0/8"];
        // The client put 1.1.1.1 in front of its own address; the proxy appended the peer.
        let h = [("x-forwarded-for", "1.1.1.1, 203.0.113.9, 10.0.0.2")];
        assert_eq!(
            addr("10.0.0.1:80", &h, &trusted).as_deref(),
            Some("203.0.113.9")
        );
        let h = [(
            "forwarded",
            "for=1.1.1.1, for=\"[2001:db8::7]:443\";proto=https",
        )];
        assert_eq!(
            addr("10.0.0.1:80", &h, &trusted).as_deref(),
            Some("2001:db8::7")
        );
        // Two lines are one list.
        let h = [
            ("x-forwarded-for", "1.1.1.1"),
            ("x-forwarded-for", "203.0.113.9"),
        ];
        assert_eq!(
            addr("10.0.0.1:80", &h, &trusted).as_deref(),
            Some("203.0.113.9")
        );
        // A dual-stack listener's mapped peer is the IPv4 proxy.
        let h = [("x-forwarded-for", "203.0.113.9")];
        assert_eq!(
            addr("[::ffff:10.0.0.1]:80", &h, &trusted).as_deref(),
            Some("203.0.113.9")
        );
    }

    #[test]
    fn a_header_that_does_not_parse_or_is_ambiguous_is_ignored() {
        let trusted = ["10.0.0.1"];
        for h in [
            vec![("x-forwarded-for", "203.0.113.9, not-an-address")],
            vec![("x-forwarded-for", "")],
            vec![("forwarded", "for=unknown")],
            vec![("forwarded", "for=_hidden")],
            vec![("forwarded", "proto=https")],
            vec![("forwarded", "for=203.0.113.9;for=1.1.1.1")],
            vec![
                ("x-forwarded-for", "203.0.113.9"),
                ("forwarded", "for=1.1.1.1"),
            ],
            vec![],
        ] {
            assert_eq!(
                addr("10.0.0.1:80", &h, &trusted).as_deref(),
                Some("10.0.0.1"),
                "{h:?}"
            );
        }
    }

    #[test]
    fn the_user_agent_is_cut_and_a_bad_one_ignored() {
        let long = "a".repeat(300);
        let got = user_agent(&headers(&[("user-agent", &long)]));
        assert_eq!(got.map(|a| a.len()), Some(MAX_USER_AGENT));
        assert_eq!(user_agent(&headers(&[("user-agent", "  ")])), None);
        let mut map = HeaderMap::new();
        map.insert(
            header::USER_AGENT,
            HeaderValue::from_bytes(b"caf\xe9").expect("obs-text is a valid value"),
        );
        assert_eq!(user_agent(&map), None);
    }
}
