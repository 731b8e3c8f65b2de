//! Counts the code gives, held wherever the repository's text states them: a count of the
//! Lambda functions in the docs, a manifest, a script or a comment is the count of the
//! functions there are (one per routed operation, and the frontend's `image-sibling`).
//! Text that needs no count says "every function" instead.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_yaml::Value;
use sitehost::api::Operation;

/// Files whose counts this test does not read: itself (its examples), and the layers'
/// page, which is being rewritten apart (its "Six functions link neither S3 ..." is one
/// such count; drop the exception when the rewrite lands).
const NOT_READ: &[&str] = &["tests/integration/doc_facts.rs"];

/// Functions that serve no routed operation (template_consistency holds the template to
/// the same list).
const FRONTEND_FUNCTIONS: &[&str] = &["image-sibling"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the repository")
        .to_path_buf()
}

/// The functions: one per routed operation, and the frontend's.
fn function_names() -> BTreeSet<String> {
    Operation::ALL
        .iter()
        .map(|operation| operation.function_name())
        .chain(FRONTEND_FUNCTIONS.iter().copied())
        .map(str::to_string)
        .collect()
}

#[test]
fn the_functions_folder_holds_one_crate_per_function() {
    let folders: BTreeSet<String> = std::fs::read_dir(root().join("functions"))
        .expect("functions/")
        .map(|entry| entry.expect("an entry of functions/").path())
        .filter(|path| path.join("Cargo.toml").is_file())
        .map(|path| {
            path.file_name()
                .expect("a name")
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(folders, function_names());
}

/// Number words as the docs write them, up to thirty.
fn number(word: &str) -> Option<usize> {
    let units: Vec<&str> = "zero one two three four five six seven eight nine ten eleven \
                            twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen"
        .split_whitespace()
        .collect();
    let word = word.to_ascii_lowercase();
    if let Ok(n) = word.parse() {
        return Some(n);
    }
    if let Some(n) = units.iter().position(|unit| *unit == word) {
        return Some(n);
    }
    let (tens, unit) = word.split_once('-').unwrap_or((word.as_str(), "zero"));
    let tens = ["twenty", "thirty"].iter().position(|t| *t == tens)?;
    let unit = units[..10].iter().position(|u| *u == unit)?;
    Some(20 + 10 * tens + unit)
}

/// The words of a text, without comment markers and surrounding punctuation, so a
/// sentence reads the same across the lines of a comment.
fn words(text: &str) -> Vec<String> {
    text.split_whitespace()
        .map(|word| word.trim_matches(|c: char| !c.is_alphanumeric() && c != '-'))
        .filter(|word| !word.is_empty())
        .map(str::to_string)
        .collect()
}

/// Every count of functions stated in `text` ("nine functions", "9 Lambda functions",
/// "ten function binaries", "seven of the nine functions": the nine), with the words
/// that state it.
fn stated_function_counts(text: &str) -> Vec<(usize, String)> {
    let words = words(text);
    let mut found = Vec::new();
    for (at, word) in words.iter().enumerate() {
        let counted = match word.to_ascii_lowercase().as_str() {
            "functions" => true,
            "function" => words.get(at + 1).is_some_and(|next| next == "binaries"),
            _ => false,
        };
        if !counted {
            continue;
        }
        let mut before = at;
        if before > 0 && words[before - 1] == "Lambda" {
            before -= 1;
        }
        let Some(count) = before.checked_sub(1).and_then(|i| number(&words[i])) else {
            continue;
        };
        let start = before.saturating_sub(4);
        found.push((count, words[start..=at].join(" ")));
    }
    found
}

/// The prose of Rust source: its comment lines (a string such as a test's message is
/// not a statement about the repository).
fn comments(source: &str) -> String {
    source
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The repository's text files: docs, README, scripts, manifests, the template and the
/// Rust sources, outside build output and virtualenvs.
fn text_files(dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a folder of the repository") {
        let path = entry.expect("an entry").path();
        let name = path.file_name().expect("a name").to_string_lossy();
        if name.starts_with('.') || name == "target" || name == "node_modules" {
            continue;
        }
        if path.is_dir() {
            text_files(&path, into);
        } else if ["md", "rs", "toml", "yaml", "py"]
            .iter()
            .any(|ext| path.extension().is_some_and(|e| e == *ext))
            || path.parent().is_some_and(|p| p.ends_with("scripts"))
        {
            into.push(path);
        }
    }
}

#[test]
fn every_count_of_functions_in_the_repository_is_the_code_s() {
    let functions = function_names().len();
    let mut files = Vec::new();
    text_files(&root(), &mut files);
    let mut wrong = Vec::new();
    for path in files {
        let shown = path.strip_prefix(root()).unwrap_or(&path);
        if NOT_READ.iter().any(|skipped| shown.ends_with(skipped)) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue; // not text
        };
        let text = if path.extension().is_some_and(|e| e == "rs") {
            comments(&text)
        } else {
            text
        };
        for (count, words) in stated_function_counts(&text) {
            if count != functions {
                wrong.push(format!("{}: \"{words}\"", shown.display()));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "there are {functions} functions; write \"every function\" rather than a count:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn function_counts_are_found_however_they_are_written() {
    let text = "seven of the eight functions never decode; the nine function\n// binaries, \
                9 Lambda functions; a crate of many functions; every function";
    let counts: Vec<usize> = stated_function_counts(text).iter().map(|c| c.0).collect();
    assert_eq!(counts, [8, 9, 9]);
    assert_eq!(number("twenty-four"), Some(24));
    assert_eq!(number("many"), None);
}

/// The library features a function builds with, from its `Cargo.toml`.
fn features_of(function: &str) -> BTreeSet<String> {
    let manifest = root().join("functions").join(function).join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).expect("a function's Cargo.toml");
    let line = text
        .lines()
        .find(|line| line.starts_with("sitehost"))
        .unwrap_or_else(|| panic!("{function}: Cargo.toml names no sitehost dependency"));
    let Some((_, list)) = line.split_once("features = [") else {
        return BTreeSet::new();
    };
    let list = list.split(']').next().unwrap_or_default();
    list.split(',')
        .map(|feature| feature.trim().trim_matches('"').to_string())
        .filter(|feature| !feature.is_empty())
        .collect()
}

/// The function names written in backticks in `text`.
fn functions_named(text: &str) -> BTreeSet<String> {
    let functions = function_names();
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|name| functions.contains(*name))
        .map(str::to_string)
        .collect()
}

fn deploy_md() -> String {
    let text = std::fs::read_to_string(root().join("docs/deploy.md")).expect("docs/deploy.md");
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The text of `doc` from `from` to the next `to` after it.
fn between<'a>(doc: &'a str, from: &str, to: &str) -> &'a str {
    let start = doc
        .find(from)
        .unwrap_or_else(|| panic!("docs/deploy.md says {from:?}"))
        + from.len();
    let end = doc[start..]
        .find(to)
        .unwrap_or_else(|| panic!("docs/deploy.md says {to:?} after {from:?}"));
    &doc[start..start + end]
}

#[test]
fn deploy_md_names_the_functions_of_each_feature() {
    let doc = deploy_md();
    let with = |feature: &str| -> BTreeSet<String> {
        function_names()
            .into_iter()
            .filter(|function| features_of(function).contains(feature))
            .collect()
    };
    let images = between(&doc, "the S3 file store) is on for", "`files` (");
    assert_eq!(functions_named(images), with("images"), "{images}");
    let files = between(&doc, "`files` (the S3 file store alone) for", "`local`");
    assert_eq!(functions_named(files), with("files"), "{files}");
    assert!(
        with("local").is_empty(),
        "no function builds with `local` (SQLite)"
    );
}

#[test]
fn deploy_md_names_the_functions_given_the_bucket() {
    let path = root().join("template.yaml");
    let template: Value =
        serde_yaml::from_str(&std::fs::read_to_string(path).expect("template.yaml"))
            .expect("template.yaml parses");
    let given: BTreeSet<String> = template["Resources"]
        .as_mapping()
        .expect("Resources")
        .values()
        .filter(|resource| resource["Type"].as_str() == Some("AWS::Serverless::Function"))
        .filter(|function| {
            function["Properties"]["Environment"]["Variables"]
                .get("SITEHOST_BUCKET")
                .is_some()
        })
        .filter_map(|function| function["Properties"]["CodeUri"].as_str())
        .map(|uri| {
            uri.trim_end_matches('/')
                .trim_start_matches("functions/")
                .to_string()
        })
        .collect();
    let doc = deploy_md();
    let row = between(&doc, "| `SITEHOST_BUCKET` | none |", "|");
    assert_eq!(functions_named(row), given, "{row}");
}

/// The bold figure before `what` in `doc` (`**98 series**`), without separators.
fn bold_before(doc: &str, what: &str) -> u64 {
    let end = doc
        .find(&format!(" {what}**"))
        .unwrap_or_else(|| panic!("the page states **... {what}**"));
    let start = doc[..end].rfind("**").expect("the figure's opening **") + 2;
    let figure = doc[start..end].replace([',', '$'], "");
    figure
        .parse()
        .unwrap_or_else(|_| panic!("**{figure} {what}** is a number"))
}

#[test]
fn operations_md_counts_the_metric_series_the_code_writes() {
    use sitehost::api::request_log::{METRICS, PIPELINE_TIME, UPLOAD_BYTES};
    let uploads_only = [UPLOAD_BYTES, PIPELINE_TIME];
    let per_request = METRICS.iter().filter(|m| !uploads_only.contains(m)).count();
    // Every operation and `unrouted` writes the per-request metrics; image-upload alone
    // writes the upload metrics.
    let series = per_request * (Operation::ALL.len() + 1) + uploads_only.len();
    let text = std::fs::read_to_string(root().join("docs/operations.md")).expect("operations.md");
    let doc = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(bold_before(&doc, "series"), series as u64);
    // CloudWatch's custom metrics: $0.30 a month each (the first 10,000).
    let dollars = (series as f64 * 0.30).round() as u64;
    assert_eq!(bold_before(&doc, "a month"), dollars);
}

#[test]
fn deploy_md_counts_the_metrics_and_alarms_of_the_cost_table() {
    let operations = std::fs::read_to_string(root().join("docs/operations.md"))
        .expect("operations.md")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let doc = deploy_md();
    assert_eq!(
        bold_before(&doc, "custom metrics"),
        bold_before(&operations, "series"),
        "the cost table's metrics are docs/operations.md's series"
    );
    let template: Value = serde_yaml::from_str(
        &std::fs::read_to_string(root().join("template.yaml")).expect("template.yaml"),
    )
    .expect("template.yaml parses");
    let alarms = template["Resources"]
        .as_mapping()
        .expect("Resources")
        .values()
        .filter(|resource| resource["Type"].as_str() == Some("AWS::CloudWatch::Alarm"))
        .count();
    assert_eq!(bold_before(&doc, "alarms"), alarms as u64);
}
