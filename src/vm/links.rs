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
/// anything with a scheme (`https://…`), anything starting `www.`, `name@host.tld`, and bare
/// host names ending in a common top-level domain (`secure-pay.com/login`). What
/// `links(x)` gives a policy: the places a message points its reader to.
pub fn links(text: &str) -> Vec<String> {
    let is_part = |c: char| c.is_alphanumeric() || "@.-_:/+%#?=&~".contains(c);
    let mut out = Vec::new();
    for raw in text.split(|c: char| !is_part(c)) {
        let t = raw.trim_end_matches(|c: char| ".,:;-_/?#&=+%~".contains(c));
        let t = t.trim_start_matches(|c: char| ".,:;-_/?#&=+%~".contains(c));
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
            let labels: Vec<&str> = host.split('.').collect();
            labels.len() >= 2
                && labels.iter().all(|l| {
                    !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                })
                && labels.last().is_some_and(|tld| LINK_TLDS.contains(tld))
        };
        if is_link {
            out.push(t.to_string());
        }
    }
    out
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
}
