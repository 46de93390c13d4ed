//! The network capability: `fetch` inside an extension is carried out by the host, only to
//! the hosts the operator granted (`--allow-net=HOST`), with a size and a time cap. Redirects
//! are followed only to granted hosts too, so a granted host cannot bounce the request to one
//! that is not. Nothing else reaches the network: there are no sockets in the guest.
//!
//! The check is on the address too: a granted name that resolves to a loopback, private,
//! link-local or other special address is refused unless that range is granted as well
//! (`--allow-net=10.0.0.0/8`; an address granted as a host grants itself). The addresses
//! checked are the ones connected to (the request is pinned to them), so a name that
//! resolves to a public address for the check and to an inner one for the connection (DNS
//! rebinding) reaches nothing inside.

use std::time::Duration;

use futures::StreamExt;

use std::net::{IpAddr, SocketAddr};

use crate::Grants;
use crate::secrets::replace_bytes;

/// A response body larger than this is refused (the request fails).
pub const MAX_RESPONSE_BYTES: usize = 8 << 20;
/// A request body larger than this is refused before anything is sent.
pub const MAX_REQUEST_BYTES: usize = 4 << 20;
/// How long a request may take when the extension sets no timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
const MAX_REDIRECTS: usize = 5;

/// A granted host (`example.com`, `*.example.com`, either with `:port`) split into its
/// lower-cased name and the port it names, if any.
pub(crate) fn split_grant(pattern: &str) -> (String, Option<u16>) {
    let pattern = pattern.to_ascii_lowercase();
    match pattern.rsplit_once(':') {
        Some((name, p)) if !name.contains(']') || name.ends_with(']') => match p.parse::<u16>() {
            Ok(p) => (name.to_owned(), Some(p)),
            Err(_) => (pattern.clone(), None),
        },
        _ => (pattern.clone(), None),
    }
}

/// Whether `pattern` (a granted host: `example.com`, `*.example.com`, either with `:port`)
/// covers `host:port`.
fn host_matches(pattern: &str, host: &str, port: u16) -> bool {
    let (name, want_port) = split_grant(pattern);
    if want_port.is_some_and(|p| p != port) {
        return false;
    }
    let host = host.to_ascii_lowercase();
    match name.strip_prefix("*.") {
        Some(suffix) => host.len() > suffix.len() && host.ends_with(&format!(".{suffix}")),
        None => host == name,
    }
}

/// Splits `name[:port]` (the name lower-cased); `None` for a port that is not a number.
fn split_pattern(pattern: &str) -> Option<(String, Option<u16>)> {
    let pattern = pattern.to_ascii_lowercase();
    if pattern.parse::<std::net::IpAddr>().is_ok()
        || (pattern.starts_with('[') && pattern.ends_with(']'))
    {
        return Some((pattern, None));
    }
    match pattern.rsplit_once(':') {
        Some((name, p)) if !name.contains(']') || name.ends_with(']') => {
            p.parse::<u16>().ok().map(|p| (name.to_owned(), Some(p)))
        }
        _ => Some((pattern, None)),
    }
}

/// A range grant (`10.0.0.0/8`, `fd00::/8`): the addresses granted names may resolve to.
fn parse_range(pattern: &str) -> Option<(IpAddr, u8)> {
    let (address, bits) = pattern.split_once('/')?;
    let address: IpAddr = address.trim_matches(['[', ']']).parse().ok()?;
    let bits: u8 = bits.parse().ok()?;
    let max = if address.is_ipv4() { 32 } else { 128 };
    (bits <= max).then_some((address, bits))
}

fn in_range(ip: IpAddr, (base, bits): (IpAddr, u8)) -> bool {
    match (ip, base) {
        (IpAddr::V4(ip), IpAddr::V4(base)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            u32::from(ip) & mask == u32::from(base) & mask
        }
        (IpAddr::V6(ip), IpAddr::V6(base)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            u128::from(ip) & mask == u128::from(base) & mask
        }
        _ => false,
    }
}

/// What kind of special address `ip` is (one a granted name must not lead to unless its range
/// is granted), or `None` for an ordinary public address.
pub fn special_address(ip: IpAddr) -> Option<&'static str> {
    let ip = match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    };
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            if v4.is_loopback() {
                Some("loopback")
            } else if v4.is_private() {
                Some("private")
            } else if v4.is_link_local() {
                Some("link-local")
            } else if a == 100 && (64..128).contains(&b) {
                Some("carrier-grade NAT")
            } else if v4.is_unspecified() || a == 0 {
                Some("unspecified")
            } else if v4.is_multicast() || v4.is_broadcast() || a >= 240 {
                Some("multicast or reserved")
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            if v6.is_loopback() {
                Some("loopback")
            } else if v6.is_unspecified() {
                Some("unspecified")
            } else if first & 0xfe00 == 0xfc00 {
                Some("unique local (private)")
            } else if first & 0xffc0 == 0xfe80 {
                Some("link-local")
            } else if v6.is_multicast() {
                Some("multicast or reserved")
            } else {
                None
            }
        }
    }
}

/// Whether the grants let a request reach `ip`: a public address, or one inside a granted
/// range, or one granted as a host itself.
fn address_granted(grants: &Grants, ip: IpAddr) -> bool {
    special_address(ip).is_none()
        || grants.net.iter().any(|p| {
            parse_range(p).is_some_and(|range| in_range(ip, range))
                || split_grant(p)
                    .0
                    .trim_matches(['[', ']'])
                    .parse::<IpAddr>()
                    .is_ok_and(|granted| granted == ip)
        })
}

/// The addresses `host` resolves to, each checked against the grants; the request connects
/// to these and no others.
async fn granted_addresses(
    grants: &Grants,
    url: &reqwest::Url,
) -> Result<Vec<std::net::SocketAddr>, String> {
    let host = url.host_str().unwrap_or_default();
    let port = url.port_or_known_default().unwrap_or(0);
    let literal = host.trim_matches(['[', ']']).parse::<IpAddr>().ok();
    let addresses: Vec<std::net::SocketAddr> = match literal {
        Some(ip) => vec![std::net::SocketAddr::new(ip, port)],
        None => tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| {
                format!(
                    "{NETWORK_FAILURE}getaddrinfo {} {host}",
                    lookup_error_code(&e)
                )
            })?
            .collect(),
    };
    if let Some(refused) = addresses.iter().find(|a| !address_granted(grants, a.ip())) {
        let ip = refused.ip();
        let kind = special_address(ip).unwrap_or("special");
        let range = if ip.is_ipv4() {
            format!("{ip}/32")
        } else {
            format!("[{ip}]/128")
        };
        return Err(format!(
            "fetch of {url} denied: {host} resolves to {ip}, a {kind} address, and that range is not granted (grant it with --allow-net={range}, or a wider range)"
        ));
    }
    if addresses.is_empty() {
        return Err(format!("fetch of {url}: {host} has no address"));
    }
    Ok(addresses)
}

/// Whether `pattern` is a host as `--allow-net` takes it: a DNS name or an IP address, or
/// `*.` and a name, with an optional `:port`; no scheme, path or other wildcard; or a range
/// of addresses granted names may resolve to (`10.0.0.0/8`).
pub fn is_host_pattern(pattern: &str) -> bool {
    if parse_range(pattern).is_some() {
        return true;
    }
    let Some((name, _)) = split_pattern(pattern) else {
        return false;
    };
    let name = name.strip_prefix("*.").unwrap_or(&name);
    if name.parse::<std::net::IpAddr>().is_ok()
        || name
            .strip_prefix('[')
            .and_then(|n| n.strip_suffix(']'))
            .is_some_and(|n| n.parse::<std::net::Ipv6Addr>().is_ok())
    {
        return true;
    }
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

/// Whether a granted `pattern` covers every host a requested pattern names (a request for
/// `*.github.com` is covered by `*.github.com` or `*.com`, not by `api.github.com`).
pub fn pattern_covers(granted: &str, requested: &str) -> bool {
    let (Some((grant_name, grant_port)), Some((want_name, want_port))) =
        (split_pattern(granted), split_pattern(requested))
    else {
        return false;
    };
    if grant_port.is_some() && grant_port != want_port {
        return false;
    }
    match (grant_name.strip_prefix("*."), want_name.strip_prefix("*.")) {
        (None, None) => grant_name == want_name,
        (None, Some(_)) => false,
        (Some(suffix), wanted) => {
            let wanted = wanted.unwrap_or(&want_name);
            (wanted == suffix && want_name.starts_with("*."))
                || (wanted.len() > suffix.len() && wanted.ends_with(&format!(".{suffix}")))
        }
    }
}

/// The (placeholder, value) of every secret granted for `url`'s host whose value the host has.
fn secrets_for(grants: &Grants, url: &reqwest::Url) -> Vec<(String, String)> {
    let host = url.host_str().unwrap_or_default();
    let port = url.port_or_known_default().unwrap_or(0);
    grants
        .secrets
        .iter()
        .filter(|s| host_matches(&s.host, host, port))
        .filter_map(|s| Some((s.placeholder(), s.value()?)))
        .collect()
}

/// The refusal for a URL whose host is not granted, naming the flag that grants it.
fn check_url(grants: &Grants, url: &reqwest::Url) -> Result<(), String> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "fetch of {url} refused: only http and https URLs can be fetched"
        ));
    }
    let host = url.host_str().unwrap_or_default();
    let port = url.port_or_known_default().unwrap_or(0);
    if grants.net.iter().any(|p| host_matches(p, host, port)) {
        Ok(())
    } else {
        Err(format!(
            "fetch of {url} denied: the network capability is not granted for {host} (grant it with --allow-net={host})"
        ))
    }
}

/// The addresses `name` resolves to, for an extension whose grants name it (on any port);
/// a failed lookup is Node's code for it (`ENOTFOUND`), a refusal names the flag to grant.
pub async fn lookup(grants: &Grants, name: &str) -> Result<Vec<String>, String> {
    let granted = grants.net.iter().any(|pattern| {
        let (_, port) = split_grant(pattern);
        host_matches(pattern, name, port.unwrap_or(0))
    });
    if !granted {
        return Err(format!(
            "the network capability is not granted for {name} (grant it with --allow-net={name})"
        ));
    }
    let addresses = tokio::net::lookup_host((name, 0))
        .await
        .map_err(|e| lookup_error_code(&e).to_owned())?;
    let mut found: Vec<String> = Vec::new();
    for address in addresses {
        let ip = address.ip().to_string();
        if !found.contains(&ip) {
            found.push(ip);
        }
    }
    Ok(found)
}

/// A client for a long-lived HTTP connection an extension opens to `url` (the MCP server it
/// registers): checked against its grants like a `fetch`, pinned to the addresses checked,
/// following no redirect; `headers` with the secrets granted for that host in place of their
/// placeholders.
pub async fn pinned_client(
    grants: &Grants,
    url: &str,
    headers: &mut [(String, String)],
) -> Result<reqwest::Client, String> {
    let url = reqwest::Url::parse(url).map_err(|e| format!("invalid URL {url:?}: {e}"))?;
    check_url(grants, &url)?;
    let addresses = granted_addresses(grants, &url).await?;
    let secrets = secrets_for(grants, &url);
    for (_, value) in headers.iter_mut() {
        for (placeholder, secret) in &secrets {
            *value = value.replace(placeholder.as_str(), secret);
        }
    }
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .resolve_to_addrs(url.host_str().unwrap_or_default(), &addresses)
        .build()
        .map_err(|e| e.to_string())
}

/// One `fetch` an extension asks for.
#[derive(Debug, Clone, Default)]
pub struct FetchRequest {
    pub url: String,
    /// GET when empty.
    pub method: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
    pub timeout: Option<Duration>,
}

/// What the server answered, secrets already replaced by their placeholders.
#[derive(Debug, Clone)]
pub struct FetchResponse {
    /// The URL answered, after redirects.
    pub url: String,
    pub status: u16,
    pub status_text: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub redirected: bool,
}

/// Carries out one `fetch` for an extension under its network grants.
pub async fn fetch(grants: &Grants, request: FetchRequest) -> Result<FetchResponse, String> {
    let FetchRequest {
        url,
        method,
        headers,
        body,
        timeout,
    } = request;
    let mut url =
        reqwest::Url::parse(&url).map_err(|e| format!("fetch: invalid URL {url:?}: {e}"))?;
    check_url(grants, &url)?;
    let method = if method.is_empty() {
        "GET".to_owned()
    } else {
        method.to_ascii_uppercase()
    };
    let mut method = reqwest::Method::from_bytes(method.as_bytes())
        .map_err(|_| format!("fetch: invalid method {method:?}"))?;
    if body.as_ref().is_some_and(|b| b.len() > MAX_REQUEST_BYTES) {
        return Err(format!(
            "fetch: the request body is larger than {MAX_REQUEST_BYTES} bytes"
        ));
    }
    let timeout = timeout
        .unwrap_or(DEFAULT_TIMEOUT)
        .min(Duration::from_secs(600));
    // Redirects are followed here, one hop at a time, each checked against the grants, each
    // with a client pinned to the addresses checked.
    let mut body = body;
    let mut redirected = false;
    let response = 'hops: {
        for _ in 0..=MAX_REDIRECTS {
            let addresses = granted_addresses(grants, &url).await?;
            let client = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(timeout)
                .resolve_to_addrs(url.host_str().unwrap_or_default(), &addresses)
                .build()
                .map_err(|e| format!("fetch: {e}"))?;
            let mut builder = client.request(method.clone(), url.clone());
            // Secrets granted for this host go in place of their placeholders (each hop
            // anew: a redirect elsewhere gets the placeholders).
            let secrets = secrets_for(grants, &url);
            for (k, v) in &headers {
                let mut v = v.clone();
                for (placeholder, value) in &secrets {
                    v = v.replace(placeholder.as_str(), value);
                }
                builder = builder.header(k, v);
            }
            if let Some(b) = &body {
                let mut b = b.clone();
                for (placeholder, value) in &secrets {
                    b = replace_bytes(&b, placeholder.as_bytes(), value.as_bytes());
                }
                builder = builder.body(b);
            }
            let response = builder
                .send()
                .await
                .map_err(|e| fetch_error(&url, &e, &addresses))?;
            let status = response.status();
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .map(str::to_owned);
            match location {
                Some(location) if status.is_redirection() => {
                    url = url
                        .join(&location)
                        .map_err(|e| format!("fetch: bad redirect {location:?}: {e}"))?;
                    check_url(grants, &url)?;
                    redirected = true;
                    // 303, and 301/302 after POST, continue as GET without a body.
                    if status == reqwest::StatusCode::SEE_OTHER
                        || (matches!(status.as_u16(), 301 | 302) && method == reqwest::Method::POST)
                    {
                        method = reqwest::Method::GET;
                        body = None;
                    }
                }
                _ => break 'hops response,
            }
        }
        return Err(format!(
            "fetch of {url}: more than {MAX_REDIRECTS} redirects"
        ));
    };
    let status = response.status();
    // A response that echoes a secret gives the extension its placeholder back.
    let hide = |bytes: &[u8]| -> Vec<u8> {
        grants
            .secrets
            .iter()
            .fold(bytes.to_vec(), |b, secret| match secret.value() {
                Some(value) => replace_bytes(&b, value.as_bytes(), secret.placeholder().as_bytes()),
                None => b,
            })
    };
    let response_headers = response
        .headers()
        .iter()
        .map(|(k, v)| {
            let value = String::from_utf8_lossy(&hide(v.as_bytes())).into_owned();
            (k.as_str().to_owned(), value)
        })
        .collect();
    let mut bytes = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| fetch_error(&url, &e, &[]))?;
        if bytes.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(format!(
                "fetch of {url}: the response is larger than {MAX_RESPONSE_BYTES} bytes"
            ));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(FetchResponse {
        url: url.to_string(),
        status: status.as_u16(),
        status_text: status.canonical_reason().unwrap_or("").to_owned(),
        headers: response_headers,
        body: hide(&bytes),
        redirected,
    })
}

/// How a request that was allowed but failed on the network starts its error: `fetch failed: `
/// and then what Node's `cause` would say (`getaddrinfo ENOTFOUND example.com`, `connect
/// ECONNREFUSED 127.0.0.1:8080`). The guest's fetch throws Node's `TypeError("fetch failed")`
/// with that cause; a refusal by the grants says what to grant instead.
pub const NETWORK_FAILURE: &str = "fetch failed: ";

/// Node's code for a failed name lookup (getaddrinfo's EAI_* as libuv names them).
fn lookup_error_code(e: &std::io::Error) -> &'static str {
    let text = e.to_string();
    if text.contains("Temporary failure") {
        "EAI_AGAIN"
    } else if text.contains("Non-recoverable") {
        "EAI_FAIL"
    } else {
        "ENOTFOUND"
    }
}

fn fetch_error(url: &reqwest::Url, e: &reqwest::Error, addresses: &[SocketAddr]) -> String {
    use std::io::ErrorKind;
    let io_kind = std::iter::successors(Some(e as &(dyn std::error::Error + 'static)), |e| {
        e.source()
    })
    .find_map(|e| e.downcast_ref::<std::io::Error>())
    .map(std::io::Error::kind);
    let code = match io_kind {
        Some(ErrorKind::ConnectionRefused) => Some("ECONNREFUSED"),
        Some(ErrorKind::ConnectionReset) => Some("ECONNRESET"),
        Some(ErrorKind::TimedOut) => Some("ETIMEDOUT"),
        Some(ErrorKind::HostUnreachable) => Some("EHOSTUNREACH"),
        Some(ErrorKind::NetworkUnreachable) => Some("ENETUNREACH"),
        _ => None,
    };
    match (code, addresses.first()) {
        (Some(code), Some(address)) if e.is_connect() => {
            // Node writes an IPv6 address without brackets.
            let (ip, port) = (address.ip(), address.port());
            format!("{NETWORK_FAILURE}connect {code} {ip}:{port}")
        }
        (Some(code), _) => format!("{NETWORK_FAILURE}read {code}"),
        _ if e.is_timeout() => format!("{NETWORK_FAILURE}fetch of {url} timed out (ETIMEDOUT)"),
        _ => format!("{NETWORK_FAILURE}fetch of {url}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::{address_granted, host_matches, is_host_pattern, pattern_covers, special_address};
    use crate::Grants;

    #[test]
    fn inner_addresses_need_their_range_granted() {
        let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
        for (address, kind) in [
            ("127.0.0.1", Some("loopback")),
            ("10.1.2.3", Some("private")),
            ("172.16.0.1", Some("private")),
            ("192.168.1.1", Some("private")),
            ("169.254.169.254", Some("link-local")),
            ("100.64.0.1", Some("carrier-grade NAT")),
            ("0.0.0.0", Some("unspecified")),
            ("::1", Some("loopback")),
            ("fd00::1", Some("unique local (private)")),
            ("fe80::1", Some("link-local")),
            ("::ffff:127.0.0.1", Some("loopback")),
            ("93.184.216.34", None),
            ("2606:4700::1111", None),
        ] {
            assert_eq!(special_address(ip(address)), kind, "{address}");
        }
        let grants = |net: &[&str]| Grants {
            net: net.iter().map(|s| s.to_string()).collect(),
            ..Grants::default()
        };
        assert!(!address_granted(
            &grants(&["localhost:8080"]),
            ip("127.0.0.1")
        ));
        assert!(address_granted(&grants(&["127.0.0.0/8"]), ip("127.0.0.1")));
        assert!(address_granted(&grants(&["127.0.0.1"]), ip("127.0.0.1")));
        assert!(address_granted(
            &grants(&["127.0.0.1:8080"]),
            ip("127.0.0.1")
        ));
        assert!(!address_granted(&grants(&["10.0.0.0/16"]), ip("10.1.0.1")));
        assert!(address_granted(&grants(&["10.0.0.0/8"]), ip("10.1.0.1")));
        assert!(address_granted(&grants(&["::1/128"]), ip("::1")));
        assert!(address_granted(&grants(&[]), ip("93.184.216.34")));
        assert!(is_host_pattern("10.0.0.0/8") && is_host_pattern("fd00::/8"));
        assert!(!is_host_pattern("10.0.0.0/33") && !is_host_pattern("x.com/8"));
    }

    #[test]
    fn host_patterns_and_their_coverage() {
        for good in [
            "example.com",
            "*.example.com",
            "localhost:8080",
            "127.0.0.1",
            "[::1]:80",
        ] {
            assert!(is_host_pattern(good), "{good}");
        }
        for bad in [
            "",
            "http://x.com",
            "x.com/a",
            "*",
            "a*.com",
            "x.com:port",
            "-x.com",
            "a..b",
        ] {
            assert!(!is_host_pattern(bad), "{bad}");
        }
        assert!(pattern_covers("api.github.com", "api.github.com"));
        assert!(pattern_covers("*.github.com", "api.github.com"));
        assert!(pattern_covers("*.github.com", "*.github.com"));
        assert!(pattern_covers("*.com", "*.github.com"));
        assert!(!pattern_covers("*.github.com", "github.com"));
        assert!(!pattern_covers("api.github.com", "*.github.com"));
        assert!(!pattern_covers("*.github.com", "*.com"));
        assert!(pattern_covers("example.com", "example.com:8443"));
        assert!(!pattern_covers("example.com:443", "example.com"));
        assert!(pattern_covers("example.com:443", "example.com:443"));
    }

    #[test]
    fn granted_hosts_match_exactly_by_suffix_and_by_port() {
        assert!(host_matches("example.com", "example.com", 443));
        assert!(host_matches("Example.COM", "example.com", 80));
        assert!(!host_matches("example.com", "api.example.com", 443));
        assert!(!host_matches("example.com", "example.com.evil.net", 443));
        assert!(host_matches("*.example.com", "api.example.com", 443));
        assert!(!host_matches("*.example.com", "example.com", 443));
        assert!(!host_matches("*.example.com", "evilexample.com", 443));
        assert!(host_matches("127.0.0.1:8080", "127.0.0.1", 8080));
        assert!(!host_matches("127.0.0.1:8080", "127.0.0.1", 8081));
        assert!(host_matches("127.0.0.1", "127.0.0.1", 9999));
    }
}
