//! The reference pages and docs/deploy.md state the same defaults as the code.

use super::mib;

/// The reference pages (docs/configuration.md, budgets.md, api.md, authentication.md) and
/// docs/deploy.md state the same defaults as the code.
// Reads better whole: one table of defaults, checked in each document's table, then in the prose.
#[test]
fn the_reference_and_deploy_guide_state_the_codes_limits() {
    use sitehost::config::{self, thousands};
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let reference = ["configuration", "budgets", "api", "authentication"]
        .map(|page| {
            let path = format!("docs/{page}.md");
            std::fs::read_to_string(root.join(&path)).expect(&path)
        })
        .join("\n");
    let deploy = std::fs::read_to_string(root.join("docs/deploy.md")).expect("deploy.md");
    let fetch = config::FetchConfig::default();
    let pixels = config::ImageLimits::default();
    let server = config::ServerLimits::default();
    let upload = config::DEFAULT_UPLOAD_MAX_BYTES as u64;
    let body = config::DEFAULT_MAX_BODY_BYTES as u64;
    let defaults: Vec<(&str, String)> = vec![
        ("SITEHOST_MAX_BODY_BYTES", format!("{body} ({})", mib(body))),
        ("SITEHOST_UPLOAD_MAX_BYTES", upload.to_string()),
        ("SITEHOST_FETCH_MAX_BYTES", fetch.max_bytes.to_string()),
        ("SITEHOST_MAX_PIXELS", pixels.max_pixels.to_string()),
        ("SITEHOST_MAX_SIDE", pixels.max_side.to_string()),
        ("SITEHOST_ID_BLOCK", config::DEFAULT_ID_BLOCK.to_string()),
        (
            "SITEHOST_REQUESTS_PER_MINUTE",
            config::DEFAULT_REQUESTS_PER_MINUTE.to_string(),
        ),
        (
            "SITEHOST_UPLOADS_PER_MINUTE",
            config::DEFAULT_UPLOADS_PER_MINUTE.to_string(),
        ),
        (
            "SITEHOST_HEADER_TIMEOUT_SECS",
            server.header_timeout.as_secs().to_string(),
        ),
        (
            "SITEHOST_BODY_TIMEOUT_SECS",
            server.body_timeout.as_secs().to_string(),
        ),
        (
            "SITEHOST_UPLOAD_WAIT_SECS",
            server.upload_wait.as_secs().to_string(),
        ),
        ("SITEHOST_MAX_FETCHES", server.max_fetches.to_string()),
        (
            "SITEHOST_WRITE_TIMEOUT_SECS",
            server.write_timeout.as_secs().to_string(),
        ),
    ];
    // configuration.md: | `VAR` | used by | meaning | default |; deploy.md: | `VAR` | default | meaning |.
    let cell = |text: &str, var: &str, column: usize| -> Option<String> {
        let row = text
            .lines()
            .find(|l| l.starts_with(&format!("| `{var}` |")))?;
        Some(row.split('|').nth(column)?.trim().to_string())
    };
    let starts_with_number = |cell: &str, number: &str| {
        cell.strip_prefix(number)
            .is_some_and(|rest| !rest.starts_with(|c: char| c.is_ascii_digit()))
    };
    for (var, expected) in &defaults {
        let stated =
            cell(&reference, var, 4).unwrap_or_else(|| panic!("docs/configuration.md lists {var}"));
        assert!(
            starts_with_number(&stated, expected),
            "docs/configuration.md: {var} defaults to {expected}, not {stated}"
        );
        if let Some(stated) = cell(&deploy, var, 2) {
            assert!(
                starts_with_number(&stated, expected),
                "docs/deploy.md: {var} defaults to {expected}, not {stated}"
            );
        }
    }
    assert!(
        cell(&deploy, "SITEHOST_UPLOAD_MAX_BYTES", 2).is_some(),
        "docs/deploy.md states the upload limit"
    );
    // The table of upload limits (budgets.md) and the reference's prose.
    for phrase in [
        format!(
            "| decoded base64 upload | {} bytes ({} KiB",
            thousands(upload),
            thousands(upload / 1024)
        ),
        format!(
            "| fetched file | {} bytes ({})",
            thousands(fetch.max_bytes),
            mib(fetch.max_bytes)
        ),
        format!("| {} |", thousands(pixels.max_pixels)),
        format!(
            "| pixels a side | {} |",
            thousands(u64::from(pixels.max_side))
        ),
        format!(
            "{} s to connect, {} s in all",
            fetch.connect_timeout.as_secs(),
            fetch.total_timeout.as_secs()
        ),
        format!("| redirects | {},", fetch.max_redirects),
        format!(
            "`limit` defaults to {} and is clamped to {}",
            sitehost::operations::listing::DEFAULT_LIMIT,
            sitehost::operations::listing::MAX_LIMIT
        ),
        format!(
            "1 to {} characters",
            sitehost::domain::business::MAX_NAME_CHARS
        ),
        format!(
            "within {} s of the server's clock",
            sitehost::auth::TIMESTAMP_WINDOW_SECS
        ),
        format!(
            "at most {} KiB",
            sitehost::api::params::MAX_FORM_BODY_BYTES >> 10
        ),
        format!(
            "distinct, at most {}, each a location",
            sitehost::domain::site::MAX_SITE_LOCATIONS
        ),
        format!(
            "at most {} bytes (UTF-8)",
            thousands(sitehost::domain::post::MAX_CONTENT_BYTES as u64)
        ),
    ] {
        assert!(
            reference.contains(&phrase),
            "the reference states {phrase:?}"
        );
    }
}
