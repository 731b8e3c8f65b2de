//! Every environment variable the code reads is set for the functions that need it, or is
//! optional with a default documented in docs/deploy.md; the test-only ones are never set.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_yaml::Value;

use super::{functions, globals_value, tagged, template, variables, workspace_root};

/// Read by every function: the template sets them in `Globals` (or on each function).
const SET_FOR_ALL: &[&str] = &[
    "SITEHOST_STORE",
    "SITEHOST_TABLE",
    "SITEHOST_PUBLIC_HOSTS",
    "SITEHOST_DEFAULT_SCHEME",
    "SITEHOST_ORIGIN_VERIFY",
    "SITEHOST_ORIGIN_VERIFY_PREVIOUS",
    "RUST_LOG",
    "SITEHOST_METRICS_NAMESPACE",
];

/// Needed by some functions only (function directory names).
const SET_FOR: &[(&str, &[&str])] = &[(
    "SITEHOST_BUCKET",
    &["image-upload", "image-delete", "image-sibling"],
)];

/// Optional: unset, the code's default applies. docs/deploy.md lists each with its default.
const OPTIONAL: &[&str] = &[
    "SITEHOST_BUCKET",
    "SITEHOST_STAGING_BUCKET",
    "SITEHOST_DATA_DIR",
    "SITEHOST_MAX_BODY_BYTES",
    "SITEHOST_ID_BLOCK",
    "SITEHOST_UPLOAD_MAX_BYTES",
    "SITEHOST_FETCH_MAX_BYTES",
    "SITEHOST_MAX_PIXELS",
    "SITEHOST_MAX_SIDE",
    "SITEHOST_REQUESTS_PER_MINUTE",
    "SITEHOST_UPLOADS_PER_MINUTE",
    // `sitehost serve`'s own guards (the local server is not part of any function).
    "SITEHOST_HEADER_TIMEOUT_SECS",
    "SITEHOST_BODY_TIMEOUT_SECS",
    "SITEHOST_MAX_UPLOADS",
    "SITEHOST_UPLOAD_WAIT_SECS",
    "SITEHOST_MAX_FETCHES",
    "SITEHOST_MAX_CONNECTIONS",
    "SITEHOST_WRITE_TIMEOUT_SECS",
    // `sitehost` only: `json` writes the Lambda log format (the functions always do).
    "SITEHOST_LOG_FORMAT",
];

/// For tests only; a deployed function must never have them. `SITEHOST_TEST_*` too.
const NEVER_SET: &[&str] = &["SITEHOST_FETCH_ALLOW_HOSTS", "SITEHOST_WRITE_EVENTS"];
const TEST_ONLY_PREFIX: &str = "SITEHOST_TEST_";

/// `SITEHOST_*` names in string literals of sitehost/src (e.g. `var("SITEHOST_TABLE")`).
fn variables_in_source() -> BTreeMap<String, PathBuf> {
    fn walk(dir: &Path, found: &mut BTreeMap<String, PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("read dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                walk(&path, found);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("source");
                for (at, _) in text.match_indices("\"SITEHOST_") {
                    let name: String = text[at + 1..]
                        .chars()
                        .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                        .collect();
                    found.entry(name).or_insert_with(|| path.clone());
                }
            }
        }
    }
    let mut found = BTreeMap::new();
    walk(&workspace_root().join("sitehost/src"), &mut found);
    found
}

// Reads better whole: the code's variables against the lists, then the lists against the template.
#[test]
fn every_variable_the_code_reads_is_set_or_optional() {
    let in_source = variables_in_source();
    assert!(
        in_source.contains_key("SITEHOST_TABLE"),
        "the source scan found nothing: {in_source:?}"
    );
    for (name, file) in &in_source {
        let known = SET_FOR_ALL.contains(&name.as_str())
            || SET_FOR.iter().any(|(n, _)| n == name)
            || OPTIONAL.contains(&name.as_str())
            || NEVER_SET.contains(&name.as_str())
            || name.starts_with(TEST_ONLY_PREFIX);
        assert!(
            known,
            "{} reads {name}, which this test does not know: set it in template.yaml (and add \
             it to SET_FOR_ALL/SET_FOR) or add it to OPTIONAL and document its default in \
             docs/deploy.md",
            file.display()
        );
    }
    // The lists hold no variable the code stopped reading (RUST_LOG is read by tracing).
    for name in SET_FOR_ALL
        .iter()
        .chain(SET_FOR.iter().map(|(n, _)| n))
        .chain(OPTIONAL)
        .filter(|n| **n != "RUST_LOG")
    {
        assert!(
            in_source.contains_key(*name),
            "{name} is listed here but not read in sitehost/src"
        );
    }

    let template = template();
    let globals = variables(&template["Globals"]["Function"]);
    let deploy_doc =
        std::fs::read_to_string(workspace_root().join("docs/deploy.md")).expect("docs/deploy.md");
    for function in functions(&template) {
        let set: BTreeSet<String> = globals.union(&function.environment()).cloned().collect();
        for name in SET_FOR_ALL {
            assert!(
                set.contains(*name),
                "{}: {name} is not set",
                function.logical_id
            );
        }
        for (name, dirs) in SET_FOR {
            if dirs.contains(&function.dir.as_str()) {
                assert!(
                    set.contains(*name),
                    "{}: {name} is not set",
                    function.logical_id
                );
            }
        }
        for name in &set {
            assert!(
                !NEVER_SET.contains(&name.as_str()) && !name.starts_with(TEST_ONLY_PREFIX),
                "{}: {name} is for tests only and must not be set in template.yaml",
                function.logical_id
            );
            assert!(
                !name.starts_with("SITEHOST_") || in_source.contains_key(name),
                "{}: {name} is set but no code reads it",
                function.logical_id
            );
        }
    }
    assert_eq!(
        tagged(&globals_value(&template, "SITEHOST_TABLE"), "Ref").and_then(Value::as_str),
        Some("RecordsTable")
    );
    assert_eq!(
        globals_value(&template, "SITEHOST_STORE").as_str(),
        Some("dynamodb")
    );
    for name in OPTIONAL {
        assert!(
            deploy_doc.contains(&format!("`{name}`")),
            "{name} is optional but docs/deploy.md does not document it and its default"
        );
    }
}
