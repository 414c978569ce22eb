//! Credentials inside URLs: the password of a backend's `postgres://user:password@host`
//! and the keys in a collector's `?api_key=...`. Found so that redaction masks them
//! wherever they show up, and masked in the URLs strata prints itself.

use super::redact::MASK;

/// Query parameters whose value is a credential (compared lower-case, `-` as `_`).
const SECRET_PARAMS: [&str; 12] = [
    "api_key",
    "apikey",
    "key",
    "token",
    "access_token",
    "auth",
    "password",
    "pass",
    "secret",
    "sig",
    "signature",
    "x_amz_signature",
];

/// Whether a query parameter's name says its value is a credential.
fn is_secret_param(name: &str) -> bool {
    let n = name.to_ascii_lowercase().replace('-', "_");
    SECRET_PARAMS.contains(&n.as_str())
        || n.ends_with("_token")
        || n.ends_with("_secret")
        || n.ends_with("_key")
        || n.contains("password")
}

/// Where each credential of `url` is, as byte ranges: the userinfo's password (or a
/// userinfo without one, which is a token: `https://TOKEN@host`) and secret query values.
fn credential_ranges(url: &str) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return out;
    };
    let rest = &url[scheme_end..];
    let authority_len = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    if let Some(at) = rest[..authority_len].rfind('@') {
        let userinfo = scheme_end..scheme_end + at;
        match url[userinfo.clone()].find(':') {
            Some(colon) => out.push(userinfo.start + colon + 1..userinfo.end),
            None => out.push(userinfo),
        }
    }
    if let Some(q) = url.find('?') {
        let end = url[q..].find('#').map_or(url.len(), |h| q + h);
        let mut at = q + 1;
        for pair in url[q + 1..end].split('&') {
            if let Some((name, value)) = pair.split_once('=')
                && is_secret_param(name)
                && !value.is_empty()
            {
                let start = at + name.len() + 1;
                out.push(start..start + value.len());
            }
            at += pair.len() + 1;
        }
    }
    out.retain(|r| !r.is_empty());
    out
}

/// The credentials `url` carries, for redaction (each also percent-decoded, the form a
/// program that parsed the URL prints).
pub fn credentials(url: &str) -> Vec<String> {
    let mut out = Vec::new();
    for r in credential_ranges(url) {
        let raw = url[r].to_string();
        let decoded = percent_decode(&raw);
        if decoded != raw {
            out.push(decoded);
        }
        out.push(raw);
    }
    out
}

/// Whether `url` carries a credential.
pub fn has_credentials(url: &str) -> bool {
    !credential_ranges(url).is_empty()
}

/// `url` with each credential replaced by `[secret]`.
pub fn masked(url: &str) -> String {
    let mut out = url.to_string();
    for r in credential_ranges(url).into_iter().rev() {
        out.replace_range(r, MASK);
    }
    out
}

/// `text` with every credential of `url` replaced by `[secret]` (for messages that quote
/// the URL, or an error that does).
pub fn mask_in(text: &str, url: &str) -> String {
    let mut secrets = credentials(url);
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    secrets
        .iter()
        .fold(text.to_string(), |t, s| t.replace(s.as_str(), MASK))
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(h) = s.get(i + 1..i + 3)
            && let Ok(b) = u8::from_str_radix(h, 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backends_password_is_found_and_masked() {
        let url = "postgres://strata:pa%24s-W0rd@db.internal:5432/state?sslmode=disable";
        assert_eq!(credentials(url), ["pa$s-W0rd", "pa%24s-W0rd"]);
        assert_eq!(
            masked(url),
            "postgres://strata:[secret]@db.internal:5432/state?sslmode=disable"
        );
        assert!(has_credentials(url));
    }

    #[test]
    fn a_collectors_token_is_found_in_userinfo_and_query() {
        assert_eq!(
            masked("https://user:t0ken@otel.example/v1/traces"),
            "https://user:[secret]@otel.example/v1/traces"
        );
        assert_eq!(
            masked("https://T0KEN@otel.example"),
            "https://[secret]@otel.example"
        );
        assert_eq!(
            masked("https://otel.example/v1/traces?region=eu&api_key=abc123&x=1#f"),
            "https://otel.example/v1/traces?region=eu&api_key=[secret]&x=1#f"
        );
        assert_eq!(
            credentials("https://o.example/?Api-Key=k1&dd_token=k2"),
            ["k1", "k2"]
        );
    }

    #[test]
    fn a_message_quoting_the_url_is_masked() {
        let url = "https://u:s3cr%2Ft@otel.example/v1?api_key=k3y-9";
        assert_eq!(
            mask_in(&format!("could not send to {url}: error for s3cr/t"), url),
            "could not send to https://u:[secret]@otel.example/v1?api_key=[secret]: error for [secret]"
        );
    }

    #[test]
    fn urls_without_credentials_are_left_alone() {
        for url in [
            "file:///home/u/state",
            "s3://bucket?endpoint=http://127.0.0.1:9000&region=us-east-1&s3ForcePathStyle=true",
            "http://localhost:4318",
            "https://api.pulumi.com",
            "https://o.example/path@v1",
            "not a url",
        ] {
            assert!(!has_credentials(url), "{url}");
            assert_eq!(masked(url), url);
        }
    }
}
