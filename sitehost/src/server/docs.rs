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
