//! A site's address: domain, subdomain and base directory, as stored and compared. Host
//! names are ASCII (an internationalised domain is sent in its `xn--` form) and lower
//! case; a base directory starts and ends with `/`. One address belongs to one active site
//! of the whole service (the stores hold that).

/// The longest host name DNS allows.
const MAX_HOST_CHARS: usize = 253;
const MAX_LABEL_CHARS: usize = 63;
pub const MAX_BASE_DIRECTORY_CHARS: usize = 255;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Address {
    pub domain: String,
    pub subdomain: String,
    pub base_directory: String,
}

impl Address {
    /// The address as one string, unique per address: no part holds a space.
    pub fn key(&self) -> String {
        format!("{} {} {}", self.domain, self.subdomain, self.base_directory)
    }

    /// How the address reads in messages: `www.example.com/blog/`.
    pub fn display(&self) -> String {
        format!("{}.{}{}", self.subdomain, self.domain, self.base_directory)
    }
}

/// A domain or subdomain: dot-separated labels of ASCII letters, digits and hyphens (no
/// hyphen first or last), each 1 to 63 characters, 253 in all; lower-cased.
pub fn host(value: &str) -> Result<String, String> {
    let host = value.trim().to_ascii_lowercase();
    if host.is_empty() {
        return Err("This field may not be blank.".into());
    }
    if host.len() > MAX_HOST_CHARS {
        return Err(format!(
            "Ensure this value has at most {MAX_HOST_CHARS} characters."
        ));
    }
    for label in host.split('.') {
        let valid = !label.is_empty()
            && label.len() <= MAX_LABEL_CHARS
            && label
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !valid {
            return Err(format!(
                "'{label}' is not a valid host name label: use letters, digits and hyphens \
                 (not first or last), 1 to {MAX_LABEL_CHARS} characters, separated by dots; \
                 send an internationalised name in its xn-- form."
            ));
        }
    }
    Ok(host)
}

/// A base directory: `/`, or `/`-separated segments of ASCII letters, digits and `-._~`
/// (no empty, `.` or `..` segment), starting with `/`; a missing final `/` is added.
pub fn base_directory(value: &str) -> Result<String, String> {
    let mut dir = value.trim().to_string();
    if !dir.starts_with('/') {
        return Err("Must start with '/' (the site's root is '/').".into());
    }
    if !dir.ends_with('/') {
        dir.push('/');
    }
    if dir.chars().count() > MAX_BASE_DIRECTORY_CHARS {
        return Err(format!(
            "Ensure this value has at most {MAX_BASE_DIRECTORY_CHARS} characters."
        ));
    }
    // Between the first and the final `/`; none for the root.
    if let Some(inner) = dir.strip_prefix('/').and_then(|d| d.strip_suffix('/')) {
        for segment in inner.split('/') {
            let valid = !segment.is_empty()
                && segment != "."
                && segment != ".."
                && segment
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b));
            if !valid {
                return Err(format!(
                    "'{dir}' is not a valid directory: use segments of letters, digits and \
                     -._~ between slashes, like /blog/ or /shops/north/."
                ));
            }
        }
    }
    Ok(dir)
}

/// A `domain` or `subdomain` filter's value as stored values compare: lower case. A value
/// no site can have simply matches nothing.
pub fn host_filter(value: &str) -> String {
    value.trim().to_ascii_lowercase()
}

/// A `base_directory` filter's value as stored values compare: with its final `/`.
pub fn base_directory_filter(value: &str) -> String {
    let dir = value.trim();
    if dir.ends_with('/') {
        dir.to_string()
    } else {
        format!("{dir}/")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_lower_case_labels() {
        assert_eq!(host(" Example.COM ").as_deref(), Ok("example.com"));
        assert_eq!(
            host("xn--bcher-kva.example").as_deref(),
            Ok("xn--bcher-kva.example")
        );
        for bad in [
            "",
            "a..b",
            "-a.com",
            "a-.com",
            "bücher.de",
            "a b.com",
            "a/b",
            &"a".repeat(64),
        ] {
            assert!(host(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn base_directories_start_and_end_with_a_slash() {
        assert_eq!(base_directory("/").as_deref(), Ok("/"));
        assert_eq!(base_directory("/blog").as_deref(), Ok("/blog/"));
        assert_eq!(
            base_directory("/blog/user.1/").as_deref(),
            Ok("/blog/user.1/")
        );
        for bad in [
            "", "blog/", "//", "/a//b/", "/../", "/a b/", "/a#b/", "/a?b/",
        ] {
            assert!(base_directory(bad).is_err(), "{bad:?}");
        }
        assert_eq!(base_directory_filter("/blog"), "/blog/");
    }

    #[test]
    fn address_keys_differ_per_address() {
        let a = Address {
            domain: "example.com".into(),
            subdomain: "www".into(),
            base_directory: "/".into(),
        };
        let b = Address {
            base_directory: "/x/".into(),
            ..a.clone()
        };
        assert_ne!(a.key(), b.key());
        assert_eq!(a.display(), "www.example.com/");
    }
}
