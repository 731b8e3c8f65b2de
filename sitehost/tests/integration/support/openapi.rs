//! Every reply the HTTP tests receive is checked against the API reference,
//! `docs/openapi.json`, so the document cannot drift from what the server does: the
//! operation must list the status, the body must be JSON matching that response's schema
//! (`$ref`s into `components` resolved), and the response's required headers (`Location`,
//! `WWW-Authenticate`, `Allow`, `Retry-After`) must be there and match theirs. A path the
//! document does not list must answer its `NotFound` response, and a method a path does not
//! list its `MethodNotAllowed` response, with `Allow` naming exactly the documented methods.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use reqwest::header::HeaderMap;
use serde_json::Value;
use sitehost::client::{ClientResponse, PartnerClient};

/// OpenAPI's methods, in the order the server's `Allow` lists them.
const METHODS: [&str; 8] = [
    "get", "post", "put", "delete", "patch", "head", "options", "trace",
];

/// `docs/openapi.json`, read once per test process.
pub fn document() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(|| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/openapi.json");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        serde_json::from_str(&text).expect("docs/openapi.json is not valid JSON")
    })
}

/// Follows local `$ref`s (`#/components/...`) until a value that is not a reference.
fn resolve(value: &Value) -> &Value {
    let mut value = value;
    while let Some(reference) = value.get("$ref").and_then(Value::as_str) {
        let pointer = reference
            .strip_prefix('#')
            .unwrap_or_else(|| panic!("only local $refs are used, got {reference}"));
        value = document()
            .pointer(pointer)
            .unwrap_or_else(|| panic!("dangling $ref {reference} in docs/openapi.json"));
    }
    value
}

/// The document's path template for a request path (query dropped; the trailing slash is
/// optional, as the router has it): `/api/v2/businesses/12` gives `/api/v2/businesses/{id}/`.
pub fn path_template(path_and_query: &str) -> Option<String> {
    let path = path_and_query.split(['?', '#']).next().unwrap_or_default();
    let path = path.strip_suffix('/').unwrap_or(path);
    let segments: Vec<&str> = path.split('/').collect();
    document()["paths"]
        .as_object()
        .expect("paths")
        .keys()
        .find(|template| {
            let template = template.strip_suffix('/').unwrap_or(template);
            let parts: Vec<&str> = template.split('/').collect();
            parts.len() == segments.len()
                && parts.iter().zip(&segments).all(|(part, segment)| {
                    if part.starts_with('{') && part.ends_with('}') {
                        !segment.is_empty()
                    } else {
                        part == segment
                    }
                })
        })
        .cloned()
}

/// The methods a documented path serves, as the `Allow` header lists them.
pub fn documented_methods(template: &str) -> Vec<String> {
    let item = &document()["paths"][template];
    METHODS
        .into_iter()
        .filter(|m| item.get(*m).is_some())
        .map(str::to_ascii_uppercase)
        .collect()
}

/// A JSON Schema validator for a schema of the document; `components` travels along so the
/// schema's `$ref`s resolve. Built once per schema location.
fn validator(location: &str, schema: &Value) -> Arc<jsonschema::Validator> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<jsonschema::Validator>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(found) = cache.lock().expect("cache").get(location) {
        return Arc::clone(found);
    }
    let mut root = schema.clone();
    let object = root
        .as_object_mut()
        .unwrap_or_else(|| panic!("{location}: a schema must be an object"));
    assert!(
        !object.contains_key("components"),
        "{location}: a schema may not use the key `components`"
    );
    object.insert("components".into(), document()["components"].clone());
    let built = Arc::new(
        jsonschema::draft202012::new(&root)
            .unwrap_or_else(|e| panic!("{location}: not a valid JSON Schema: {e}")),
    );
    cache
        .lock()
        .expect("cache")
        .insert(location.to_string(), Arc::clone(&built));
    built
}

fn validate(location: &str, schema: &Value, instance: &Value, what: &str) {
    let validator = validator(location, schema);
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|e| format!("  at '{}': {e}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{what} does not match docs/openapi.json ({location}):\n{}\nbody: {instance}",
        errors.join("\n")
    );
}

/// Checks one response object of the document against a reply: content type, body, headers.
fn check_against(location: &str, response: &Value, headers: &HeaderMap, body: &Value, what: &str) {
    let response = resolve(response);
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    // A response documented without content (a 204): no body and no content type.
    if response.get("content").is_none() {
        assert!(
            content_type.is_empty() && body.is_null(),
            "{what}: {location} documents no body, got '{content_type}' {body}"
        );
        return;
    }
    let schema = response["content"]["application/json"]
        .get("schema")
        .unwrap_or_else(|| panic!("{what}: {location} documents no application/json body"));
    assert!(
        content_type.starts_with("application/json"),
        "{what}: content-type '{content_type}', but the document says application/json"
    );
    validate(
        &format!("{location}/content/application~1json/schema"),
        schema,
        body,
        what,
    );
    if let Some(documented) = response.get("headers").and_then(Value::as_object) {
        for (name, header) in documented {
            let header = resolve(header);
            let value = headers.get(name.as_str()).and_then(|v| v.to_str().ok());
            match value {
                Some(value) => validate(
                    &format!("{location}/headers/{name}/schema"),
                    &header["schema"],
                    &Value::String(value.to_string()),
                    &format!("{what}: header {name}"),
                ),
                None => assert!(
                    header["required"] != Value::Bool(true),
                    "{what}: the document requires header {name}"
                ),
            }
        }
    }
}

/// Checks a reply to `method path_and_query` against the document; panics, saying what
/// differs, when the document does not describe it.
pub fn check(method: &str, path_and_query: &str, status: u16, headers: &HeaderMap, body: &Value) {
    let what = format!("{method} {path_and_query} -> {status}");
    let Some(template) = path_template(path_and_query) else {
        assert_eq!(
            status, 404,
            "{what}: a path the document does not list must answer 404"
        );
        let location = "#/components/responses/NotFound";
        let reference = serde_json::json!({ "$ref": location });
        return check_against(location, &reference, headers, body, &what);
    };
    let item = &document()["paths"][&template];
    let Some(operation) = item.get(method.to_ascii_lowercase()) else {
        assert_eq!(
            status, 405,
            "{what}: a method {template} does not document must answer 405"
        );
        let location = "#/components/responses/MethodNotAllowed";
        let reference = serde_json::json!({ "$ref": location });
        check_against(location, &reference, headers, body, &what);
        let allow = headers
            .get("allow")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        assert_eq!(
            allow,
            documented_methods(&template).join(", "),
            "{what}: Allow must name the documented methods"
        );
        return;
    };
    let code = status.to_string();
    let response = operation["responses"]
        .get(&code)
        .or_else(|| operation["responses"].get("default"))
        .unwrap_or_else(|| {
            panic!(
                "{what}: status {status} is not documented for {} {template} in docs/openapi.json (body: {body})",
                method.to_ascii_uppercase()
            )
        });
    let location = format!(
        "#/paths/{}/{}/responses/{code}",
        template.replace('~', "~0").replace('/', "~1"),
        method.to_ascii_lowercase()
    );
    check_against(&location, response, headers, body, &what);
}

/// Checks a reply of the partner client.
pub fn check_reply(method: &str, path_and_query: &str, reply: &ClientResponse) {
    check(
        method,
        path_and_query,
        reply.status,
        &reply.headers,
        &reply.body,
    );
}

/// Reads a raw `reqwest` response, checks it against the document, and returns its status
/// and JSON body (`Null` if it was not JSON, which the check refuses).
pub async fn checked(method: &str, response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let url = response.url().clone();
    let path_and_query = match url.query() {
        Some(query) => format!("{}?{query}", url.path()),
        None => url.path().to_string(),
    };
    let headers = response.headers().clone();
    let bytes = response.bytes().await.expect("response body");
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    check(method, &path_and_query, status, &headers, &body);
    (status, body)
}

/// The signing partner client, with every reply checked against the document.
#[derive(Clone)]
pub struct CheckedClient(PartnerClient);

impl CheckedClient {
    pub fn new(base: &str, key: &str, secret: &str) -> Self {
        CheckedClient(PartnerClient::new(base, key, secret))
    }

    pub async fn send(
        &self,
        method: &str,
        path_and_query: &str,
        body: Option<Vec<u8>>,
    ) -> reqwest::Result<ClientResponse> {
        let reply = self.0.send(method, path_and_query, body).await?;
        check_reply(method, path_and_query, &reply);
        Ok(reply)
    }

    pub async fn get(&self, path_and_query: &str) -> reqwest::Result<ClientResponse> {
        self.send("GET", path_and_query, None).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> reqwest::Result<ClientResponse> {
        self.send("POST", path, Some(body.to_string().into_bytes()))
            .await
    }

    /// A POST with an `Idempotency-Key`.
    pub async fn post_once(
        &self,
        path: &str,
        body: &Value,
        key: &str,
    ) -> reqwest::Result<ClientResponse> {
        let body = Some(body.to_string().into_bytes());
        let headers = [("idempotency-key", key)];
        let reply = self
            .0
            .send_with_headers("POST", path, body, &headers)
            .await?;
        check_reply("POST", path, &reply);
        Ok(reply)
    }

    pub async fn put(&self, path: &str, body: &Value) -> reqwest::Result<ClientResponse> {
        self.send("PUT", path, Some(body.to_string().into_bytes()))
            .await
    }
}
