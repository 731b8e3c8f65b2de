//! A site's address: domain, subdomain and base directory, as stored and compared. Host
//! names are stored in their ASCII form, lower case (IDNA: an internationalised name may
//! be sent in Unicode or in its `xn--` form, and is stored in the latter); a base directory
//! starts and ends with `/` and is lower case too (`/Blog/` is `/blog/`). A site is reached
//! at its host, `subdomain.domain`, compared whole (`www` + `harbourcafe.com` is
//! `www.harbourcafe.com`, as is `www.harbourcafe` + `com`); a `www` site also at its bare
//! host (`harbourcafe.com`, which `harbourcafe` + `com` names too). One host belongs to one account's active sites, and one host and directory to
//! one active site (the stores hold both, `store::sites::Holdings`).

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
        format!("{}{}", self.host(), self.base_directory)
    }

    /// The host a visitor names: `subdomain.domain`.
    pub fn host(&self) -> String {
        format!("{}.{}", self.subdomain, self.domain)
    }

    /// The host without a leading `www.`: a `www` site (`www` + `example.com`, or
    /// `www.example` + `com`) is reached at both, its `formatted_domain` being one or the
    /// other by `www_primary`.
    pub fn bare_host(&self) -> String {
        let host = self.host();
        match host.strip_prefix("www.") {
            Some(bare) => bare.to_string(),
            None => host,
        }
    }

    /// Every host the site answers at: its host, and for a `www` site its bare host too.
    /// An active site's account alone may have sites at these hosts.
    pub fn hosts(&self) -> Vec<String> {
        let (host, bare) = (self.host(), self.bare_host());
        if host == bare {
            vec![host]
        } else {
            vec![host, bare]
        }
    }

    /// The bare host and the base directory (`example.com/blog/`): one active site alone
    /// may be at it.
    pub fn path(&self) -> String {
        format!("{}{}", self.bare_host(), self.base_directory)
    }
}

/// `value` in its ASCII form (IDNA, UTS #46: Unicode labels become `xn--` ones, and every
/// letter is lower-cased), or `None` when it is no valid name.
fn ascii_host(value: &str) -> Option<String> {
    // Bounded before normalising: punycode costs more than linear time in a label's length,
    // and no name over 253 characters can normalise to one within them.
    let value = value.trim();
    if value.chars().count() > MAX_HOST_CHARS {
        return None;
    }
    idna::domain_to_ascii(value).ok()
}

/// A domain or subdomain: in its ASCII form ([`ascii_host`]), dot-separated labels of
/// letters, digits and hyphens (no hyphen first or last), each 1 to 63 characters, 253 in
/// all; lower-cased.
pub fn host(value: &str) -> Result<String, String> {
    if value.trim().is_empty() {
        return Err("This field may not be blank.".into());
    }
    if value.trim().chars().count() > MAX_HOST_CHARS {
        return Err(format!(
            "Ensure this value has at most {MAX_HOST_CHARS} characters."
        ));
    }
    let Some(host) = ascii_host(value) else {
        return Err(format!(
            "'{}' is not a valid host name: use labels of letters, digits and hyphens (not \
             first or last), separated by dots (an internationalised name in Unicode or in \
             its xn-- form).",
            value.trim()
        ));
    };
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
                 (not first or last), 1 to {MAX_LABEL_CHARS} characters, separated by dots \
                 (an internationalised name in Unicode or in its xn-- form)."
            ));
        }
    }
    Ok(host)
}

/// A base directory: `/`, or `/`-separated segments of ASCII letters, digits and `-._~`
/// (no empty, `.` or `..` segment), starting with `/`; a missing final `/` is added.
pub fn base_directory(value: &str) -> Result<String, String> {
    // Case-folded: `/Blog/` and `/blog/` are one directory of one host.
    let mut dir = value.trim().to_ascii_lowercase();
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

/// A `domain` or `subdomain` filter's value as stored values compare: its ASCII form, lower
/// case. A value no site can have simply matches nothing.
pub fn host_filter(value: &str) -> String {
    ascii_host(value).unwrap_or_else(|| value.trim().to_ascii_lowercase())
}

/// A `base_directory` filter's value as stored values compare: lower case, with its final
/// `/`.
pub fn base_directory_filter(value: &str) -> String {
    let dir = value.trim().to_ascii_lowercase();
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
    fn a_long_host_is_refused_before_it_is_normalised() {
        let long = "\u{e9}".repeat(100_000);
        assert_eq!(
            host(&long),
            Err(format!(
                "Ensure this value has at most {MAX_HOST_CHARS} characters."
            ))
        );
        assert_eq!(host_filter(&long), long);
    }

    #[test]
    fn hosts_are_lower_case_labels() {
        assert_eq!(host(" Example.COM ").as_deref(), Ok("example.com"));
        assert_eq!(
            host("xn--bcher-kva.example").as_deref(),
            Ok("xn--bcher-kva.example")
        );
        // Unicode is stored in its xn-- form, as a browser and DNS name it.
        assert_eq!(host("Bücher.DE").as_deref(), Ok("xn--bcher-kva.de"));
        assert_eq!(host_filter("BÜCHER.de"), "xn--bcher-kva.de");
        for bad in [
            "",
            "a..b",
            "-a.com",
            "a-.com",
            "xn--a.com",
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
        assert_eq!(base_directory("/Blog/North").as_deref(), Ok("/blog/north/"));
        assert_eq!(base_directory_filter("/BLOG"), "/blog/");
    }

    #[test]
    fn a_host_is_compared_whole_and_a_www_site_holds_its_bare_domain() {
        let at = |domain: &str, subdomain: &str, dir: &str| Address {
            domain: domain.into(),
            subdomain: subdomain.into(),
            base_directory: dir.into(),
        };
        let cafe = at("harbourcafe.com", "www", "/");
        assert_eq!(cafe.hosts(), ["www.harbourcafe.com", "harbourcafe.com"]);
        assert_eq!(cafe.path(), "harbourcafe.com/");
        let spelled = at("com", "www.harbourcafe", "/");
        assert_eq!(
            (spelled.hosts(), spelled.path()),
            (cafe.hosts(), cafe.path())
        );
        let bare = at("com", "harbourcafe", "/blog/");
        assert_eq!(bare.hosts(), ["harbourcafe.com"]);
        assert_eq!(bare.path(), "harbourcafe.com/blog/");
        assert_eq!(
            at("harbourcafe.com", "shop", "/").hosts(),
            ["shop.harbourcafe.com"]
        );
        assert_eq!(cafe.display(), "www.harbourcafe.com/");
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
