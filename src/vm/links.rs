//! `links(x)`: the web and e-mail addresses written in a text. Owns what counts as an address
//! in free text; knows nothing of where it came from (the caller asks that of each).

/// Top-level domains a bare host name (`shop.example.com` without `www.` or a scheme) must end
/// in to be read as a web address rather than a file name (`notes.txt`) or an abbreviation.
const LINK_TLDS: &[&str] = &[
    "com", "net", "org", "info", "biz", "io", "co", "ai", "app", "dev", "me", "tv", "xyz",
    "online", "site", "tech", "shop", "store", "cloud", "link", "page", "club", "top", "edu",
    "gov", "int", "mil", "eu", "uk", "us", "de", "fr", "ch", "nl", "be", "at", "se", "no", "dk",
    "fi", "es", "it", "pt", "pl", "cz", "ru", "ua", "cn", "jp", "kr", "in", "au", "nz", "ca", "br",
    "mx", "ar", "za", "ie", "ly", "gl",
];

/// The web and e-mail addresses written in a text, as written (trailing punctuation trimmed):
/// anything with a scheme (`https://…`), anything starting `www.`, `name@host.tld`, bare host
/// names ending in a common top-level domain (`secure-pay.com/login`), and bare IP addresses:
/// IPv4 (`10.0.0.5`, `10.0.0.5:8080/x`), IPv6 in brackets (`[2001:db8::1]:443/x`) or bare
/// (`2001:db8::1`). What `links(x)` gives a policy: the places a message points its reader to.
pub fn links(text: &str) -> Vec<String> {
    let is_part = |c: char| c.is_alphanumeric() || "@.-_:/+%#?=&~[]".contains(c);
    let mut out = Vec::new();
    for raw in text.split(|c: char| !is_part(c)) {
        let t = unbracket(trim_punctuation(raw));
        if t.len() < 4 {
            continue;
        }
        let lower = t.to_ascii_lowercase();
        let is_link = if lower.contains("://") || lower.starts_with("www.") {
            true
        } else if let Some((user, host)) = lower.split_once('@') {
            !user.is_empty() && host.contains('.') && !host.starts_with('.')
        } else {
            let host = lower.split(['/', '?', '#']).next().unwrap_or("");
            is_ip_host(host) || is_named_host(host)
        };
        if is_link {
            out.push(t.to_string());
        }
    }
    out
}

/// A word without the punctuation that ends a sentence or opens a clause around it.
fn trim_punctuation(raw: &str) -> &str {
    let punctuation = |c: char| ".,:;-_/?#&=+%~".contains(c);
    raw.trim_end_matches(punctuation)
        .trim_start_matches(punctuation)
}

/// A word in square brackets that is not a bracketed IPv6 address (`[www.example.com]`), without
/// its brackets; anything else as it is.
fn unbracket(t: &str) -> &str {
    if !t.starts_with('[') || bracketed_ipv6(t) {
        return t;
    }
    trim_punctuation(t.trim_start_matches('[').trim_end_matches(']'))
}

/// `[IPv6]`, optionally followed by a port and a path.
fn bracketed_ipv6(t: &str) -> bool {
    t.strip_prefix('[')
        .and_then(|rest| rest.split_once(']'))
        .is_some_and(|(inside, _)| inside.parse::<std::net::Ipv6Addr>().is_ok())
}

/// A host part that is an IP address: IPv4 with an optional port, IPv6 in brackets (with an
/// optional port) or bare.
fn is_ip_host(host: &str) -> bool {
    if host.starts_with('[') {
        return bracketed_ipv6(host);
    }
    if host.parse::<std::net::Ipv6Addr>().is_ok() {
        return true;
    }
    let (addr, port) = host.split_once(':').unwrap_or((host, ""));
    addr.parse::<std::net::Ipv4Addr>().is_ok()
        && addr.split('.').count() == 4
        && port.chars().all(|c| c.is_ascii_digit())
}

/// A dotted host name ending in a common top-level domain.
fn is_named_host(host: &str) -> bool {
    let labels: Vec<&str> = host.split('.').collect();
    labels.len() >= 2
        && labels
            .iter()
            .all(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
        && labels.last().is_some_and(|tld| LINK_TLDS.contains(tld))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_found_in_text() {
        let found = links(
            "Visit www.shop.example.com, mail eve@evil.io or see https://a.example/x?y=1. \
             Notes are in notes.txt, e.g. the 1.5 draft; secure-pay.com/login too",
        );
        assert_eq!(
            found,
            vec![
                "www.shop.example.com",
                "eve@evil.io",
                "https://a.example/x?y=1",
                "secure-pay.com/login"
            ]
        );
        assert!(links("no links here, only words and 3.14").is_empty());
    }

    #[test]
    fn bare_ip_addresses_are_links() {
        let found = links(
            "Send it to 203.0.113.7, or 10.0.0.5:8080/upload; also [2001:db8::1]:443/x \
             and fe80::1ff:fe23:4567:890a. See [www.example.com].",
        );
        assert_eq!(
            found,
            vec![
                "203.0.113.7",
                "10.0.0.5:8080/upload",
                "[2001:db8::1]:443/x",
                "fe80::1ff:fe23:4567:890a",
                "www.example.com",
            ]
        );
    }

    #[test]
    fn numbers_and_times_are_not_ip_addresses() {
        assert!(links("version 1.2.3, at 10:30, ratio 3.14, 300.1.2.3, [note]").is_empty());
    }
}
