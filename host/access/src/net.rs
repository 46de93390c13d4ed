//! The network capability: `fetch` inside an extension is carried out by the host, only to
//! the hosts the operator granted (`--allow-net=HOST`), with a size and a time cap. Redirects
//! are followed only to granted hosts too, so a granted host cannot bounce the request to one
//! that is not. Nothing else reaches the network: there are no sockets in the guest.

use std::time::Duration;

use base64::Engine as _;
use futures::StreamExt;
use serde_json::{Value, json};

use crate::Grants;

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

/// Whether `pattern` is a host as `--allow-net` takes it: a DNS name or an IP address, or
/// `*.` and a name, with an optional `:port`; no scheme, path or other wildcard.
pub fn is_host_pattern(pattern: &str) -> bool {
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

/// Carries out one `fetch` for an extension. `request` is `{ url, method?, headers?: [[k, v]],
/// body?: base64, timeoutMs? }`; the answer `{ url, status, statusText, headers: [[k, v]],
/// body: base64, redirected }`.
pub async fn fetch(grants: &Grants, request: &Value) -> Result<Value, String> {
    let url = request["url"].as_str().unwrap_or_default();
    let mut url =
        reqwest::Url::parse(url).map_err(|e| format!("fetch: invalid URL {url:?}: {e}"))?;
    check_url(grants, &url)?;
    let method = request["method"]
        .as_str()
        .unwrap_or("GET")
        .to_ascii_uppercase();
    let mut method = reqwest::Method::from_bytes(method.as_bytes())
        .map_err(|_| format!("fetch: invalid method {method:?}"))?;
    let body = match request["body"].as_str() {
        Some(b64) => Some(
            base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map_err(|e| format!("fetch: request body: {e}"))?,
        ),
        None => None,
    };
    if body.as_ref().is_some_and(|b| b.len() > MAX_REQUEST_BYTES) {
        return Err(format!(
            "fetch: the request body is larger than {MAX_REQUEST_BYTES} bytes"
        ));
    }
    let headers: Vec<(String, String)> = request["headers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|h| Some((h[0].as_str()?.to_owned(), h[1].as_str()?.to_owned())))
        .collect();
    let timeout = request["timeoutMs"]
        .as_u64()
        .map(Duration::from_millis)
        .unwrap_or(DEFAULT_TIMEOUT)
        .min(Duration::from_secs(600));
    // Redirects are followed here, one hop at a time, each checked against the grants.
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(timeout)
        .build()
        .map_err(|e| format!("fetch: {e}"))?;
    let mut body = body;
    let mut redirected = false;
    let response = 'hops: {
        for _ in 0..=MAX_REDIRECTS {
            let mut builder = client.request(method.clone(), url.clone());
            for (k, v) in &headers {
                builder = builder.header(k, v);
            }
            if let Some(b) = &body {
                builder = builder.body(b.clone());
            }
            let response = builder.send().await.map_err(|e| fetch_error(&url, &e))?;
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
    let response_headers: Vec<Value> = response
        .headers()
        .iter()
        .map(|(k, v)| json!([k.as_str(), String::from_utf8_lossy(v.as_bytes())]))
        .collect();
    let mut bytes = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| fetch_error(&url, &e))?;
        if bytes.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(format!(
                "fetch of {url}: the response is larger than {MAX_RESPONSE_BYTES} bytes"
            ));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(json!({
        "url": url.as_str(),
        "status": status.as_u16(),
        "statusText": status.canonical_reason().unwrap_or(""),
        "headers": response_headers,
        "body": base64::engine::general_purpose::STANDARD.encode(&bytes),
        "redirected": redirected,
    }))
}

fn fetch_error(url: &reqwest::Url, e: &reqwest::Error) -> String {
    if e.is_timeout() {
        format!("fetch of {url}: timed out")
    } else if e.is_connect() {
        format!("fetch of {url}: could not connect")
    } else {
        format!("fetch of {url}: {e}")
    }
}

#[cfg(test)]
mod tests {
    use super::{host_matches, is_host_pattern, pattern_covers};

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
