//! The API reference as `sitehost serve` serves it: the OpenAPI document at
//! `/api/v2/openapi.json` and a page rendering it at `/docs/`. Both are compiled in (the
//! renderer is vendored under `sitehost/assets/redoc`, see `scripts/fetch-redoc`), so the
//! page works offline. Local server only: the Lambda functions do not link this.

use bytes::Bytes;
use http::{Method, Response};

/// The API reference, `docs/openapi.json`: the one source the tests check responses against.
pub const OPENAPI_JSON: &str = include_str!("../../../docs/openapi.json");
/// Redoc's standalone bundle (MIT, see `sitehost/assets/redoc/LICENSE`).
const REDOC_JS: &[u8] = include_bytes!("../../assets/redoc/redoc.standalone.js");

pub const OPENAPI_PATH: &str = "/api/v2/openapi.json";
pub const PAGE_PATH: &str = "/docs/";
const REDOC_PATH: &str = "/docs/redoc.standalone.js";

/// The page loads the document from this server, so it shows what this build serves.
const PAGE: &str = r#"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>sitehost partner API v2: reference</title>
<style>body { margin: 0; padding: 0; }</style>
</head>
<body>
<div id="reference"></div>
<script src="/docs/redoc.standalone.js"></script>
<script>
Redoc.init("/api/v2/openapi.json", {
  expandResponses: "200,201",
  jsonSampleExpandLevel: 3,
  hideDownloadButton: false,
  pathInMiddlePanel: true,
  sortPropsAlphabetically: false
}, document.getElementById("reference"));
</script>
</body>
</html>
"#;

/// Always revalidated: the page and document change with the build.
fn asset(method: &Method, content_type: &'static str, body: Bytes) -> Response<Bytes> {
    crate::api::file_response(method, content_type, "no-cache", body)
}

/// The reference's answer to a `GET`/`HEAD` of one of its paths; `None` for anything else.
/// No signature is needed: the document is public.
pub fn serve(method: &Method, path: &str) -> Option<Response<Bytes>> {
    if method != Method::GET && method != Method::HEAD {
        return None;
    }
    match path {
        OPENAPI_PATH | "/api/v2/openapi.json/" => Some(asset(
            method,
            "application/json",
            Bytes::from_static(OPENAPI_JSON.as_bytes()),
        )),
        PAGE_PATH | "/docs" => Some(asset(
            method,
            "text/html; charset=utf-8",
            Bytes::from_static(PAGE.as_bytes()),
        )),
        REDOC_PATH => Some(asset(
            method,
            "application/javascript; charset=utf-8",
            Bytes::from_static(REDOC_JS),
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serves_the_document_page_and_renderer() {
        let doc = serve(&Method::GET, "/api/v2/openapi.json").expect("document");
        let parsed: serde_json::Value = serde_json::from_slice(doc.body()).expect("JSON");
        assert_eq!(parsed["openapi"], "3.1.0");
        assert_eq!(doc.headers()["content-type"], "application/json");
        let page = serve(&Method::GET, "/docs").expect("page");
        let html = String::from_utf8_lossy(page.body());
        assert!(html.contains(REDOC_PATH) && html.contains(OPENAPI_PATH));
        let js = serve(&Method::GET, REDOC_PATH).expect("renderer");
        assert_eq!(js.body().len(), REDOC_JS.len());
        assert!(serve(&Method::HEAD, "/docs/")
            .expect("head")
            .body()
            .is_empty());
        assert!(serve(&Method::POST, "/docs/").is_none());
        assert!(serve(&Method::GET, "/api/v2/businesses/").is_none());
    }
}

/// `/docs/` renders the document's introduction and tags; these hold them to the route table
/// and to the documentation pages they summarise.
#[cfg(test)]
mod truth {
    use super::OPENAPI_JSON;

    fn document() -> serde_json::Value {
        serde_json::from_str(OPENAPI_JSON).expect("JSON")
    }

    fn intro() -> String {
        document()["info"]["description"]
            .as_str()
            .expect("description")
            .to_string()
    }

    /// Markdown as plain words: links' text only, one space between words.
    fn words(markdown: &str) -> String {
        let mut text = String::new();
        let mut rest = markdown;
        while let Some(start) = rest.find("](") {
            let Some(end) = rest[start..].find(')') else {
                break;
            };
            text.push_str(&rest[..start]);
            rest = &rest[start + end + 1..];
        }
        text.push_str(rest);
        text.replace('[', "")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Every resource the route table serves, as its path names it (`businesses`).
    fn resources() -> Vec<&'static str> {
        let mut found: Vec<&str> = crate::api::ROUTES
            .iter()
            .flat_map(|entry| entry.paths)
            .filter_map(|path| path.template.split('/').nth(3))
            .filter(|resource| *resource != "business")
            .collect();
        found.sort_unstable();
        found.dedup();
        found
    }

    #[test]
    fn the_introduction_and_tags_cover_every_resource() {
        let doc = document();
        let intro = intro();
        let first = intro.split("\n\n").next().expect("a first paragraph");
        let tags: Vec<String> = doc["tags"]
            .as_array()
            .expect("tags")
            .iter()
            .map(|tag| tag["name"].as_str().expect("name").to_lowercase())
            .collect();
        // A resource in the platform's words.
        fn spoken(resource: &str) -> &str {
            match resource {
                "posts" => "blog posts",
                other => other,
            }
        }
        for resource in resources() {
            assert!(
                first.contains(spoken(resource)),
                "{resource} not in: {first}"
            );
            assert!(tags.iter().any(|t| t == resource), "no tag for {resource}");
        }
        assert!(
            intro.contains("`GET /api/v2/`"),
            "the API root is described"
        );
    }

    /// The signing host paragraph says what docs/authentication.md says, word for word.
    #[test]
    fn the_introduction_says_what_authentication_md_says_of_the_signed_host() {
        let page = words(include_str!("../../../docs/authentication.md"));
        let intro = intro();
        let paragraph = intro
            .split("\n\n")
            .find(|p| p.starts_with("Which URL the client called"))
            .expect("the signed host paragraph");
        // The page's pointers to other pages ("(see deploy.md)") are left out of the
        // document, which has no such pages.
        let page = page.replace(" (see deploy.md)", "");
        for sentence in words(paragraph).split(". ") {
            assert!(
                page.contains(sentence.trim_end_matches('.')),
                "not in docs/authentication.md: {sentence}"
            );
        }
    }
}
