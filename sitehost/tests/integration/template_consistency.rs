//! `template.yaml` agrees with the code:
//! - every HttpApi route of the template is served, in the local router, by the operation
//!   of the function that gets it (functions/business-list => `Operation::BusinessList`);
//! - every route of the router (each operation, with and without the trailing slash) is in
//!   the template, on exactly one function;
//! - every environment variable the code reads is set for the functions that need it, or is
//!   optional with a default documented in docs/deploy.md; the test-only ones are never set;
//! - every function's CodeUri is a workspace member whose package and binary carry its name;
//! - the CloudFront `/api/*` behaviour forwards what signature checks need, with the
//!   generated origin-verify secret that the functions compare;
//! - each function's IAM policy allows exactly the DynamoDB calls and partition keys it uses
//!   (read-only functions write only nonces and budgets; only the CLI reads the key
//!   listing), and S3 writes only under `img/upload/` (puts by image-upload, deletes by it
//!   and image-delete);
//! - files get `X-Content-Type-Options: nosniff`, a custom domain TLS 1.2 at least, and
//!   image-upload reserved concurrency;
//! - every route of the HTTP API has the throttling of its group (reads, business writes and
//!   image deletes, uploads, and the stage default for `$default`), each a parameter with its sized default;
//! - the optional per-IP WAF rate limit exists only when asked for in us-east-1, is attached
//!   to the distribution only then (or an existing ACL given by ARN), and counts unsigned
//!   `/api/` requests per source IP only.
//!
//! The template is parsed as `serde_yaml::Value`, which keeps CloudFormation tags (`!Ref`,
//! `!Sub`, `!GetAtt`, `!If`) as tagged values.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use http::Method;
use serde_yaml::Value;
use sitehost::api::{route, Operation};

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

/// Functions that serve no API operation: image-sibling answers the frontend's image
/// origin group (a function URL), not the HTTP API.
const FRONTEND_FUNCTIONS: &[&str] = &["image-sibling"];

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

const CACHING_DISABLED: &str = "4135ea2d-6df8-44a3-9df3-4b5a84be39ad";
const ALL_VIEWER_EXCEPT_HOST_HEADER: &str = "b689b0a8-53d0-40ab-baf2-68738e2966ac";

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub(crate) fn template() -> Value {
    let path = workspace_root().join("template.yaml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_yaml::from_str(&text).expect("template.yaml is not valid YAML")
}

/// The value under a CloudFormation tag such as `!Ref` (`tag` without the `!`).
pub(crate) fn tagged<'a>(value: &'a Value, tag: &str) -> Option<&'a Value> {
    match value {
        Value::Tagged(t) if t.tag == tag => Some(&t.value),
        _ => None,
    }
}

/// The resource a `!Ref <logical id>` names, checked to be of type `kind`.
fn referenced<'a>(resources: &'a Value, value: &Value, kind: &str) -> &'a Value {
    let id = tagged(value, "Ref")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("{value:?}: expected !Ref <a {kind} of this template>"));
    let resource = &resources[id];
    assert_eq!(resource["Type"].as_str(), Some(kind), "{id}");
    resource
}

fn str_of<'a>(value: &'a Value, what: &str) -> &'a str {
    value
        .as_str()
        .unwrap_or_else(|| panic!("{what} must be a plain string, got {value:?}"))
}

fn operation_for_dir(dir: &str) -> Operation {
    Operation::ALL
        .into_iter()
        .find(|op| op.function_name() == dir)
        .unwrap_or_else(|| panic!("functions/{dir} names no Operation"))
}

/// One `AWS::Serverless::Function` of the template.
struct Function {
    logical_id: String,
    /// The directory under functions/ (from `CodeUri`).
    dir: String,
    resource: Value,
}

impl Function {
    fn properties(&self) -> &Value {
        &self.resource["Properties"]
    }

    /// `(method, path)` of each HttpApi event but the `$default` route.
    fn routes(&self) -> Vec<(String, String)> {
        self.all_routes()
            .into_iter()
            .filter(|(_, path)| path != "$default")
            .collect()
    }

    /// `(method, path)` of each HttpApi event, `$default` included.
    fn all_routes(&self) -> Vec<(String, String)> {
        let mut routes = Vec::new();
        let Some(events) = self.properties().get("Events").and_then(Value::as_mapping) else {
            return routes;
        };
        for (name, event) in events {
            if event["Type"].as_str() != Some("HttpApi") {
                continue;
            }
            let props = &event["Properties"];
            let what = format!("{}.Events.{name:?}", self.logical_id);
            assert_eq!(
                tagged(&props["ApiId"], "Ref").and_then(Value::as_str),
                Some("HttpApi"),
                "{what}: ApiId must be !Ref HttpApi"
            );
            // Neither Path nor Method is how SAM spells the `$default` route (any method).
            if props.get("Path").is_none() && props.get("Method").is_none() {
                routes.push(("ANY".to_string(), "$default".to_string()));
                continue;
            }
            routes.push((
                str_of(&props["Method"], &what).to_ascii_uppercase(),
                str_of(&props["Path"], &what).to_string(),
            ));
        }
        routes
    }

    fn environment(&self) -> BTreeSet<String> {
        variables(self.properties())
    }

    /// Every IAM statement of the function's `Policies`.
    fn statements(&self) -> Vec<&Value> {
        self.properties()["Policies"]
            .as_sequence()
            .map(|policies| {
                policies
                    .iter()
                    .filter_map(|p| p.get("Statement").and_then(Value::as_sequence))
                    .flatten()
                    .collect()
            })
            .unwrap_or_default()
    }
}

fn variables(properties: &Value) -> BTreeSet<String> {
    properties
        .get("Environment")
        .and_then(|e| e.get("Variables"))
        .and_then(Value::as_mapping)
        .map(|vars| {
            vars.keys()
                .map(|k| str_of(k, "variable name").to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn functions(template: &Value) -> Vec<Function> {
    let resources = template["Resources"].as_mapping().expect("Resources");
    let mut functions = Vec::new();
    for (id, resource) in resources {
        if resource["Type"].as_str() != Some("AWS::Serverless::Function") {
            continue;
        }
        let logical_id = str_of(id, "logical id").to_string();
        let code_uri = str_of(&resource["Properties"]["CodeUri"], "CodeUri");
        let dir = code_uri
            .trim_end_matches('/')
            .strip_prefix("functions/")
            .unwrap_or_else(|| panic!("{logical_id}: CodeUri {code_uri} is not functions/<name>"))
            .to_string();
        functions.push(Function {
            logical_id,
            dir,
            resource: resource.clone(),
        });
    }
    assert!(!functions.is_empty(), "no functions in template.yaml");
    functions
}

/// The functions of the API's operations (all but [`FRONTEND_FUNCTIONS`]).
fn api_functions(template: &Value) -> Vec<Function> {
    functions(template)
        .into_iter()
        .filter(|f| !FRONTEND_FUNCTIONS.contains(&f.dir.as_str()))
        .collect()
}

/// `/api/v2/businesses/{id}/` => `/api/v2/businesses/1/`.
fn concrete(path: &str) -> String {
    path.replace("{id}", "1")
}

#[test]
fn every_template_route_is_served_by_its_functions_operation() {
    let template = template();
    for function in api_functions(&template) {
        let operation = operation_for_dir(&function.dir);
        let routes = function.routes();
        assert!(
            !routes.is_empty(),
            "{} has no HttpApi route",
            function.logical_id
        );
        for (method, path) in routes {
            let m = Method::from_bytes(method.as_bytes()).expect("method");
            let routed = route(&m, &concrete(&path)).unwrap_or_else(|e| {
                panic!(
                    "{}: {method} {path} is not a route of sitehost::api::route: {e:?}",
                    function.logical_id
                )
            });
            assert_eq!(
                routed.operation, operation,
                "{}: {method} {path} is routed to {:?} locally, but the template sends it to {}",
                function.logical_id, routed.operation, function.dir
            );
            assert_eq!(
                routed.id.is_some(),
                path.contains("{id}"),
                "{method} {path}"
            );
        }
    }
}

#[test]
fn every_router_route_is_in_the_template_once() {
    let template = template();
    let mut in_template: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for function in functions(&template) {
        for route in function.routes() {
            in_template
                .entry(route)
                .or_default()
                .push(function.logical_id.clone());
        }
    }
    for (route, owners) in &in_template {
        assert_eq!(owners.len(), 1, "{route:?} is claimed by {owners:?}");
    }

    // Every (method, path) the router accepts, with and without the trailing slash.
    let methods = [
        Method::GET,
        Method::POST,
        Method::PUT,
        Method::PATCH,
        Method::DELETE,
    ];
    let mut served = BTreeSet::new();
    for resource in [
        "businesses",
        "business",
        "images",
        "images/uploads",
        "locations",
        "sites",
        "posts",
    ] {
        for template_path in [
            format!("/api/v2/{resource}/"),
            format!("/api/v2/{resource}"),
            format!("/api/v2/{resource}/{{id}}/"),
            format!("/api/v2/{resource}/{{id}}"),
        ] {
            for method in &methods {
                let Ok(routed) = route(method, &concrete(&template_path)) else {
                    continue;
                };
                served.insert(routed.operation);
                let key = (method.to_string(), template_path.clone());
                assert!(
                    in_template.contains_key(&key),
                    "the router serves {} {template_path} ({:?}) but template.yaml has no such \
                     HttpApi route",
                    key.0,
                    routed.operation
                );
            }
        }
    }
    for operation in Operation::ALL {
        assert!(
            served.contains(&operation),
            "{operation:?} is reached by no path tried here: add its resource to this test"
        );
    }
}

#[test]
fn each_operation_has_one_function_and_code_uri_is_a_workspace_member() {
    let template = template();
    let functions = functions(&template);
    let dirs: BTreeSet<&str> = functions.iter().map(|f| f.dir.as_str()).collect();
    assert_eq!(dirs.len(), functions.len(), "two functions share a CodeUri");
    let expected: BTreeSet<String> = Operation::ALL
        .into_iter()
        .map(|op| op.function_name().to_string())
        .chain(FRONTEND_FUNCTIONS.iter().map(|d| d.to_string()))
        .collect();
    let found: BTreeSet<String> = dirs.iter().map(|d| d.to_string()).collect();
    assert_eq!(
        found, expected,
        "template functions differ from Operation::ALL"
    );

    let root = workspace_root();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    let members = workspace_members(&manifest);
    for function in &functions {
        let dir = root.join("functions").join(&function.dir);
        assert!(
            dir.join("src/main.rs").is_file(),
            "{}: {} has no src/main.rs",
            function.logical_id,
            dir.display()
        );
        let member = format!("functions/{}", function.dir);
        assert!(
            members.contains(&member),
            "{}: {member} is not a workspace member",
            function.logical_id
        );
        let package = std::fs::read_to_string(dir.join("Cargo.toml")).expect("member Cargo.toml");
        assert!(
            package
                .lines()
                .any(|l| l.replace(' ', "") == format!("name=\"{}\"", function.dir)),
            "{}: the package in {member} must be named {}",
            function.logical_id,
            function.dir
        );
        // A function's main.rs holds no tests; a harness would be one more large link in
        // every test build (docs/development.md, CI's time).
        assert!(
            package.lines().any(|l| l.replace(' ', "") == "test=false"),
            "{}: {member}/Cargo.toml must declare its [[bin]] with test = false",
            function.logical_id
        );
        let metadata = &function.resource["Metadata"];
        assert_eq!(
            metadata["BuildMethod"].as_str(),
            Some("rust-cargolambda"),
            "{}",
            function.logical_id
        );
        assert_eq!(
            metadata["BuildProperties"]["Binary"].as_str(),
            Some(function.dir.as_str()),
            "{}: Metadata.BuildProperties.Binary",
            function.logical_id
        );
        let main = std::fs::read_to_string(dir.join("src/main.rs")).expect("main.rs");
        if FRONTEND_FUNCTIONS.contains(&function.dir.as_str()) {
            assert!(
                !main.contains("Operation::"),
                "{}: serves no operation",
                function.logical_id
            );
            assert!(
                function.routes().is_empty(),
                "{}: not behind the API",
                function.logical_id
            );
            continue;
        }
        let operation = format!("Operation::{:?}", operation_for_dir(&function.dir));
        // Exactly this, so that the functions of one build group are one program told
        // apart by a constant: `SAM_CHECK_PROFILE=quick` holds one of them to the size
        // budget for all (scripts/sam-check).
        let code: String = main
            .lines()
            .filter(|l| !l.starts_with("//!"))
            .collect::<Vec<_>>()
            .join("\n");
        let expected = format!(
            "use sitehost::api::{{lambda, Operation}};\n\n#[tokio::main]\n\
             async fn main() -> Result<(), lambda_http::Error> {{\n    \
             lambda::start({operation}).await\n}}"
        );
        assert_eq!(
            code.trim(),
            expected,
            "{}: src/main.rs must only start {operation}",
            function.logical_id
        );
    }
    // Every function directory is deployed.
    for entry in std::fs::read_dir(root.join("functions")).expect("functions/") {
        let name = entry
            .expect("entry")
            .file_name()
            .into_string()
            .expect("name");
        assert!(
            dirs.contains(name.as_str()),
            "functions/{name} is not in template.yaml"
        );
    }
}

/// The `members = [...]` of the workspace manifest.
fn workspace_members(manifest: &str) -> BTreeSet<String> {
    let start = manifest.find("members").expect("workspace members");
    let rest = &manifest[start..];
    let list = &rest[rest.find('[').expect("[")..=rest.find(']').expect("]")];
    list.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

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

fn globals_value(template: &Value, name: &str) -> Value {
    template["Globals"]["Function"]["Environment"]["Variables"][name].clone()
}

/// The actions of a statement, as strings.
fn actions(statement: &Value) -> Vec<String> {
    match &statement["Action"] {
        Value::String(a) => vec![a.clone()],
        Value::Sequence(list) => list
            .iter()
            .map(|a| str_of(a, "Action").to_string())
            .collect(),
        other => panic!("unexpected Action {other:?}"),
    }
}

/// What each function may do on the table: action => the partition keys
/// (`dynamodb:LeadingKeys` patterns) it may touch (docs/dynamodb-design.md). `H#*` are
/// partitions whose key was too long and is stored as its digest (business scopes with long
/// partner ids, image scopes with long sub ids). `BUDGET#*` are the per-key request budgets.
/// `(action, partition key pattern)` grants.
type Grants = &'static [(&'static str, &'static str)];

const AUTHENTICATION: Grants = &[
    ("dynamodb:GetItem", "KEY#*"),
    ("dynamodb:PutItem", "NONCE#*"),
    ("dynamodb:UpdateItem", "BUDGET#*"),
];
/// `Idempotency-Key`s of creates and uploads: claim, read a held key, take over a lease,
/// answer, release. (A replay reads the object as its GET does: the image upload has
/// `GetItem IMAGE#*` already; the business create is granted its partition's `Query`.)
const IDEMPOTENCY: Grants = &[
    ("dynamodb:PutItem", "IDEMPOTENCY#*"),
    ("dynamodb:GetItem", "IDEMPOTENCY#*"),
    ("dynamodb:UpdateItem", "IDEMPOTENCY#*"),
    ("dynamodb:DeleteItem", "IDEMPOTENCY#*"),
];

const BUSINESS_DETAIL: Grants = &[
    ("dynamodb:GetItem", "IMAGE#*"),
    ("dynamodb:GetItem", "A#*#IC#*"),
    ("dynamodb:GetItem", "H#*"),
    ("dynamodb:Query", "A#*#I#*"),
    ("dynamodb:Query", "H#*"),
    ("dynamodb:BatchGetItem", "IMAGE#*"),
];
/// A location by id: its pointer, then its business's partition.
const LOCATION_READ: Grants = &[
    ("dynamodb:GetItem", "LOCATION#*"),
    ("dynamodb:Query", "BUSINESS#*"),
];
const ALLOWED: &[(&str, &[Grants])] = &[
    (
        "business-list",
        &[
            AUTHENTICATION,
            &[
                ("dynamodb:GetItem", "A#*#BC#*"),
                ("dynamodb:GetItem", "H#*"),
                ("dynamodb:Query", "A#*#B#*"),
                ("dynamodb:Query", "H#*"),
                ("dynamodb:BatchGetItem", "BUSINESS#*"),
            ],
        ],
    ),
    (
        "business-get",
        &[
            AUTHENTICATION,
            BUSINESS_DETAIL,
            // The detail reads the business's partition: the record and its locations.
            &[
                ("dynamodb:GetItem", "BUSINESS#*"),
                ("dynamodb:Query", "BUSINESS#*"),
            ],
        ],
    ),
    (
        "business-create",
        &[
            AUTHENTICATION,
            IDEMPOTENCY,
            BUSINESS_DETAIL,
            &[
                // A replay reads the business's partition, as its GET does.
                ("dynamodb:Query", "BUSINESS#*"),
                ("dynamodb:PutItem", "BUSINESS#*"),
                ("dynamodb:PutItem", "A#*#B#*"),
                ("dynamodb:PutItem", "H#*"),
                ("dynamodb:UpdateItem", "SEQ#business"),
                ("dynamodb:UpdateItem", "SEQ#location"),
                ("dynamodb:UpdateItem", "A#*#BC#*"),
                ("dynamodb:UpdateItem", "H#*"),
                // The logo's mark (`ADD logo_of`, on its ownership condition).
                ("dynamodb:UpdateItem", "IMAGE#*"),
                // The pointers of new location ids.
                ("dynamodb:BatchWriteItem", "LOCATION#*"),
            ],
        ],
    ),
    (
        "business-update",
        &[
            AUTHENTICATION,
            BUSINESS_DETAIL,
            &[
                ("dynamodb:GetItem", "BUSINESS#*"),
                ("dynamodb:Query", "BUSINESS#*"),
                ("dynamodb:PutItem", "BUSINESS#*"),
                ("dynamodb:PutItem", "A#*#B#*"),
                ("dynamodb:PutItem", "H#*"),
                ("dynamodb:UpdateItem", "SEQ#location"),
                ("dynamodb:DeleteItem", "A#*#B#*"),
                ("dynamodb:DeleteItem", "H#*"),
                ("dynamodb:UpdateItem", "A#*#BC#*"),
                ("dynamodb:UpdateItem", "H#*"),
                // The new logo's mark and the old one's removal.
                ("dynamodb:UpdateItem", "IMAGE#*"),
                // The pointers of new location ids.
                ("dynamodb:BatchWriteItem", "LOCATION#*"),
            ],
        ],
    ),
    // Locations: their pointer (`LOCATION#<id>`) and their business's partition.
    (
        "location-list",
        &[
            AUTHENTICATION,
            &[
                ("dynamodb:Query", "BUSINESS#*"),
                ("dynamodb:GetItem", "A#*#BC#*"),
                ("dynamodb:GetItem", "H#*"),
                ("dynamodb:Query", "A#*#B#*"),
                ("dynamodb:Query", "H#*"),
                ("dynamodb:BatchGetItem", "BUSINESS#*"),
            ],
        ],
    ),
    ("location-get", &[AUTHENTICATION, LOCATION_READ]),
    (
        "location-create",
        &[
            AUTHENTICATION,
            IDEMPOTENCY,
            LOCATION_READ,
            &[
                ("dynamodb:PutItem", "BUSINESS#*"),
                ("dynamodb:UpdateItem", "SEQ#location"),
                ("dynamodb:BatchWriteItem", "LOCATION#*"),
            ],
        ],
    ),
    (
        "location-update",
        &[
            AUTHENTICATION,
            LOCATION_READ,
            &[("dynamodb:PutItem", "BUSINESS#*")],
        ],
    ),
    (
        "location-delete",
        &[
            AUTHENTICATION,
            LOCATION_READ,
            &[
                ("dynamodb:PutItem", "BUSINESS#*"),
                ("dynamodb:DeleteItem", "LOCATION#*"),
            ],
        ],
    ),
    (
        "image-list",
        &[
            AUTHENTICATION,
            &[
                ("dynamodb:GetItem", "A#*#IC#*"),
                ("dynamodb:GetItem", "H#*"),
                ("dynamodb:Query", "A#*#I#*"),
                ("dynamodb:Query", "H#*"),
                ("dynamodb:BatchGetItem", "IMAGE#*"),
            ],
        ],
    ),
    (
        "image-get",
        &[AUTHENTICATION, &[("dynamodb:GetItem", "IMAGE#*")]],
    ),
    (
        "image-upload",
        &[
            AUTHENTICATION,
            IDEMPOTENCY,
            &[
                ("dynamodb:GetItem", "BUSINESS#*"),
                ("dynamodb:GetItem", "IMAGE#*"),
                // A site it names gives the image its sub id.
                ("dynamodb:GetItem", "SITE#*"),
                ("dynamodb:PutItem", "IMAGE#*"),
                ("dynamodb:PutItem", "A#*#I#*"),
                ("dynamodb:PutItem", "H#*"),
                ("dynamodb:UpdateItem", "SEQ#image"),
                ("dynamodb:UpdateItem", "A#*#IC#*"),
                ("dynamodb:UpdateItem", "H#*"),
                ("dynamodb:ConditionCheckItem", "BUSINESS#*"),
                // A staged upload's session: read, marked used or usable again.
                ("dynamodb:GetItem", "UPLOAD#*"),
                ("dynamodb:UpdateItem", "UPLOAD#*"),
            ],
        ],
    ),
    (
        "image-delete",
        &[
            AUTHENTICATION,
            &[
                // The image (scopes, logo marks); the business named in a 409.
                ("dynamodb:GetItem", "IMAGE#*"),
                ("dynamodb:GetItem", "BUSINESS#*"),
                // The barred item over the record, the entries and one lane per scope.
                ("dynamodb:PutItem", "IMAGE#*"),
                ("dynamodb:DeleteItem", "A#*#I#*"),
                ("dynamodb:DeleteItem", "H#*"),
                ("dynamodb:UpdateItem", "A#*#IC#*"),
                ("dynamodb:UpdateItem", "H#*"),
            ],
        ],
    ),
    (
        "image-upload-session",
        &[AUTHENTICATION, &[("dynamodb:PutItem", "UPLOAD#*")]],
    ),
    ("site-list", &[AUTHENTICATION, SITE_LIST]),
    ("site-get", &[AUTHENTICATION, SITE_DETAIL]),
    (
        "site-create",
        &[AUTHENTICATION, IDEMPOTENCY, SITE_DETAIL, SITE_CREATE],
    ),
    ("site-update", &[AUTHENTICATION, SITE_DETAIL, SITE_WRITE]),
    ("site-delete", &[AUTHENTICATION, SITE_DISABLE]),
    ("post-list", &[AUTHENTICATION, POST_LIST]),
    ("post-get", &[AUTHENTICATION, POST_READ]),
    (
        "post-create",
        &[
            AUTHENTICATION,
            IDEMPOTENCY,
            POST_READ,
            POST_WRITE,
            POST_CREATE,
        ],
    ),
    ("post-update", &[AUTHENTICATION, POST_READ, POST_WRITE]),
];

/// A site's list: its scope's count (counter lanes, or a narrow scope's entries), entries
/// and records.
const SITE_LIST: Grants = &[
    ("dynamodb:Query", "A#*#S#*"),
    ("dynamodb:Query", "A#*#SC#*"),
    ("dynamodb:Query", "H#*"),
    ("dynamodb:BatchGetItem", "SITE#*"),
];
/// A site's detail: the site, then its business with its locations (the business's
/// partition).
const SITE_DETAIL: Grants = &[
    ("dynamodb:GetItem", "SITE#*"),
    ("dynamodb:Query", "BUSINESS#*"),
];
const SITE_CREATE: Grants = &[
    ("dynamodb:UpdateItem", "SEQ#site"),
    ("dynamodb:PutItem", "SITE#*"),
    ("dynamodb:PutItem", "SITEADDR#*"),
    ("dynamodb:PutItem", "A#*#S#*"),
    ("dynamodb:PutItem", "H#*"),
    ("dynamodb:UpdateItem", "A#*#SC#*"),
    ("dynamodb:UpdateItem", "H#*"),
];
/// An update or a disable: the site, its address item taken or given up, its entries and
/// counter lanes.
const SITE_WRITE: Grants = &[
    ("dynamodb:GetItem", "SITE#*"),
    ("dynamodb:PutItem", "SITE#*"),
    ("dynamodb:PutItem", "SITEADDR#*"),
    ("dynamodb:PutItem", "A#*#S#*"),
    ("dynamodb:PutItem", "H#*"),
    ("dynamodb:DeleteItem", "SITEADDR#*"),
    ("dynamodb:DeleteItem", "A#*#S#*"),
    ("dynamodb:DeleteItem", "H#*"),
    ("dynamodb:UpdateItem", "A#*#SC#*"),
    ("dynamodb:UpdateItem", "H#*"),
];
/// A disable: the site, its address item given up, its entries and counter lanes.
const SITE_DISABLE: Grants = &[
    ("dynamodb:GetItem", "SITE#*"),
    ("dynamodb:PutItem", "SITE#*"),
    ("dynamodb:PutItem", "A#*#S#*"),
    ("dynamodb:PutItem", "H#*"),
    ("dynamodb:DeleteItem", "SITEADDR#*"),
    ("dynamodb:DeleteItem", "A#*#S#*"),
    ("dynamodb:DeleteItem", "H#*"),
    ("dynamodb:UpdateItem", "A#*#SC#*"),
    ("dynamodb:UpdateItem", "H#*"),
];
const POST_LIST: Grants = &[
    ("dynamodb:GetItem", "SITE#*"),
    ("dynamodb:Query", "A#*#P#*"),
    ("dynamodb:Query", "A#*#PC#*"),
    ("dynamodb:Query", "H#*"),
    ("dynamodb:BatchGetItem", "POST#*"),
];
/// A post and the site it is seen through.
const POST_READ: Grants = &[
    ("dynamodb:GetItem", "POST#*"),
    ("dynamodb:GetItem", "SITE#*"),
];
const POST_WRITE: Grants = &[
    ("dynamodb:PutItem", "POST#*"),
    ("dynamodb:PutItem", "A#*#P#*"),
    ("dynamodb:PutItem", "H#*"),
];
const POST_CREATE: Grants = &[
    ("dynamodb:UpdateItem", "SEQ#post"),
    ("dynamodb:UpdateItem", "A#*#PC#*"),
    ("dynamodb:UpdateItem", "H#*"),
];

/// IAM's `StringLike`: `*` matches any run of characters, `?` any one.
fn glob(pattern: &str, text: &str) -> bool {
    match pattern.chars().next() {
        None => text.is_empty(),
        Some('*') => (0..=text.len())
            .filter(|i| text.is_char_boundary(*i))
            .any(|i| glob(&pattern[1..], &text[i..])),
        Some(c) => text.chars().next().is_some_and(|t| {
            (c == '?' || c == t) && glob(&pattern[c.len_utf8()..], &text[t.len_utf8()..])
        }),
    }
}

/// A statement's `Resource` as a list of values.
fn resources(statement: &Value) -> Vec<&Value> {
    match &statement["Resource"] {
        Value::Sequence(list) => list.iter().collect(),
        other => vec![other],
    }
}

/// Every `(action, partition key pattern)` a function's statements allow on the table.
fn table_grants(function: &Function) -> BTreeSet<(String, String)> {
    let mut grants = BTreeSet::new();
    for statement in function.statements() {
        let sid = statement["Sid"].as_str().unwrap_or("?");
        let what = format!("{}: {sid}", function.logical_id);
        assert_eq!(statement["Effect"].as_str(), Some("Allow"), "{what}");
        let actions = actions(statement);
        if !actions.iter().any(|a| a.starts_with("dynamodb:")) {
            continue;
        }
        assert!(
            actions.iter().all(|a| a.starts_with("dynamodb:")),
            "{what} mixes services"
        );
        for resource in resources(statement) {
            let is_table =
                tagged(resource, "GetAtt").and_then(Value::as_str) == Some("RecordsTable.Arn");
            let is_by_name = tagged(resource, "Sub").and_then(Value::as_str)
                == Some("${RecordsTable.Arn}/index/by_name");
            assert!(
                is_table || (is_by_name && actions == ["dynamodb:Query"]),
                "{what}: resource {resource:?} (only Query may name the by_name index)"
            );
            // Businesses by name, sites by title and posts by date are ordered by it.
            if is_by_name {
                assert!(
                    ["business-list", "site-list", "post-list"].contains(&function.dir.as_str()),
                    "{what}: only the lists ordered by a key other than the id use by_name"
                );
            }
        }
        let leading = statement["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]
            .as_sequence()
            .unwrap_or_else(|| {
                panic!("{what}: every table grant is limited by dynamodb:LeadingKeys")
            });
        assert_eq!(
            statement["Condition"].as_mapping().map(|m| m.len()),
            Some(1),
            "{what}: one condition operator"
        );
        for action in &actions {
            for pattern in leading {
                grants.insert((action.clone(), str_of(pattern, "LeadingKeys").to_string()));
            }
        }
    }
    grants
}

#[test]
fn each_function_may_touch_only_the_items_it_uses() {
    let template = template();
    let functions = functions(&template);
    for function in &functions {
        let grants = table_grants(function);
        if FRONTEND_FUNCTIONS.contains(&function.dir.as_str()) {
            assert!(grants.is_empty(), "{}: no table", function.logical_id);
            continue;
        }
        let operation = operation_for_dir(&function.dir);
        let (_, expected) = ALLOWED
            .iter()
            .find(|(dir, _)| *dir == function.dir)
            .unwrap_or_else(|| panic!("{} is not in ALLOWED", function.dir));
        let expected: BTreeSet<(String, String)> = expected
            .iter()
            .flat_map(|group| group.iter())
            .map(|(a, k)| (a.to_string(), k.to_string()))
            .collect();
        assert_eq!(grants, expected, "{}: table grants", function.logical_id);

        for (action, pattern) in &grants {
            // The key listing and other keys' records are the CLI's alone.
            if ["dynamodb:Query", "dynamodb:BatchGetItem"].contains(&action.as_str()) {
                for key_item in ["KEYS", "KEY#pamuJL7pb1PEYMKig4Tj", "ACCOUNT#acme"] {
                    assert!(
                        !glob(pattern, key_item),
                        "{}: {action} on {pattern} reaches {key_item}",
                        function.logical_id
                    );
                }
            }
            let writes = [
                "dynamodb:PutItem",
                "dynamodb:UpdateItem",
                "dynamodb:DeleteItem",
                "dynamodb:BatchWriteItem",
            ]
            .contains(&action.as_str());
            if writes {
                for forbidden in ["KEY#k", "KEYS", "ACCOUNT#acme", "SEQ#user", "SEQ#account"] {
                    assert!(
                        !glob(pattern, forbidden),
                        "{}: {action} on {pattern} may write {forbidden}",
                        function.logical_id
                    );
                }
            }
            if writes && !operation.writes() {
                // Read-only functions record nonces and count budgets, nothing else.
                assert!(
                    [
                        ("dynamodb:PutItem", "NONCE#*"),
                        ("dynamodb:UpdateItem", "BUDGET#*")
                    ]
                    .contains(&(action.as_str(), pattern.as_str())),
                    "{}: a read-only function may not {action} {pattern}",
                    function.logical_id
                );
            }
            // Besides the idempotency keys a failed create or upload gives back.
            if action == "dynamodb:DeleteItem" && pattern != "IDEMPOTENCY#*" {
                assert!(
                    [
                        Operation::BusinessUpdate,
                        Operation::ImageDelete,
                        Operation::LocationDelete,
                        Operation::SiteUpdate,
                        Operation::SiteDelete
                    ]
                    .contains(&operation),
                    "{}: only business-update, image-delete, location-delete, site-update and \
                     site-delete delete (list entries of scopes left, of a deleted image; a \
                     deleted location's pointer; a site's address)",
                    function.logical_id
                );
            }
        }
    }
    // The globs themselves: `A#*#B#*` is business entries, not counters or images.
    assert!(glob("A#*#B#*", "A#1#B#d=0"));
    assert!(!glob("A#*#B#*", "A#1#BC#d=0"));
    assert!(!glob("A#*#B#*", "A#1#I#*"));
    assert!(!glob("KEY#*", "KEYS"));
}

#[test]
fn only_the_image_functions_touch_the_bucket_and_only_its_upload_prefix() {
    let template = template();
    let prefix = "${FilesBucket.Arn}/img/upload/*";
    // One pattern per sibling format: `*.avif`, `*.webp`.
    let sibling_patterns: Vec<String> = sitehost::domain::image_record::SiblingFormat::ALL
        .iter()
        .map(|format| format!("${{FilesBucket.Arn}}/img/upload/*.{}", format.extension()))
        .collect();
    let staging = "${StagingBucket.Arn}/staging/*";
    let mut sibling_grants = BTreeSet::new();
    for function in functions(&template) {
        for statement in function.statements() {
            let sid = statement["Sid"].as_str().unwrap_or("?");
            for action in actions(statement) {
                assert!(
                    !action.contains('*'),
                    "{}: {sid} grants the wildcard action {action}",
                    function.logical_id
                );
                if !action.starts_with("s3:") {
                    continue;
                }
                // image-upload writes files (and removes them when its record fails);
                // image-delete only removes them; image-sibling reads variants and writes
                // (or removes again) only siblings (AVIF, WebP). ListBucket, on the bucket itself,
                // lets image-sibling tell a missing variant (404) from a refusal.
                // image-upload-session signs forms that may only put staged files (what
                // its role may do is what its forms may); image-upload reads and deletes them.
                let mut allowed: Vec<(&str, &str)> = match function.dir.as_str() {
                    "image-upload" => vec![
                        ("s3:PutObject", prefix),
                        ("s3:DeleteObject", prefix),
                        ("s3:GetObject", staging),
                        ("s3:DeleteObject", staging),
                    ],
                    "image-upload-session" => vec![("s3:PutObject", staging)],
                    "image-delete" => vec![("s3:DeleteObject", prefix)],
                    "image-sibling" => vec![
                        ("s3:GetObject", prefix),
                        ("s3:ListBucket", "FilesBucket.Arn"),
                    ],
                    _ => vec![],
                };
                if function.dir == "image-sibling" {
                    for pattern in &sibling_patterns {
                        allowed.push(("s3:PutObject", pattern.as_str()));
                        allowed.push(("s3:DeleteObject", pattern.as_str()));
                    }
                }
                for resource in resources(statement) {
                    let named = tagged(resource, "Sub")
                        .or_else(|| tagged(resource, "GetAtt"))
                        .and_then(Value::as_str)
                        .unwrap_or("?");
                    assert!(
                        allowed.contains(&(action.as_str(), named)),
                        "{}: {sid} grants {action} on {named}",
                        function.logical_id
                    );
                    if function.dir == "image-sibling" {
                        sibling_grants.insert((action.clone(), named.to_string()));
                    }
                }
            }
        }
    }
    // image-sibling may store and remove a sibling of every format it makes.
    for pattern in &sibling_patterns {
        for action in ["s3:PutObject", "s3:DeleteObject"] {
            let grant = (action.to_string(), pattern.clone());
            assert!(
                sibling_grants.contains(&grant),
                "image-sibling: {action} on {pattern}"
            );
        }
    }
}

#[test]
fn image_upload_and_sibling_making_have_reserved_concurrency() {
    let template = template();
    // function directory, its parameter, the condition that reserves when it is not 0
    let capped = [
        (
            "image-upload",
            "ImageUploadReservedConcurrency",
            "ReserveUploadConcurrency",
        ),
        (
            "image-sibling",
            "ImageSiblingReservedConcurrency",
            "ReserveSiblingConcurrency",
        ),
    ];
    for (_, parameter_name, condition_name) in capped {
        let parameter = &template["Parameters"][parameter_name];
        assert_eq!(parameter["Type"].as_str(), Some("Number"));
        let default = parameter["Default"].as_u64().expect("a numeric default");
        assert!(
            (1..=100).contains(&default),
            "{parameter_name}: a default that caps: {default}"
        );
        assert_eq!(parameter["MinValue"].as_u64(), Some(0));
        // 0 means unreserved: CloudFormation would read it as "throttle every call".
        let condition = &template["Conditions"][condition_name];
        let not = tagged(condition, "Not")
            .and_then(Value::as_sequence)
            .unwrap_or_else(|| panic!("{condition_name}: !Not [...]"));
        let equals = tagged(&not[0], "Equals")
            .and_then(Value::as_sequence)
            .expect("!Not [!Equals [...]]");
        assert_eq!(
            tagged(&equals[0], "Ref").and_then(Value::as_str),
            Some(parameter_name)
        );
        assert_eq!(equals[1].as_u64(), Some(0));
    }

    for function in functions(&template) {
        let reserved = function.properties().get("ReservedConcurrentExecutions");
        let Some((_, parameter_name, condition_name)) =
            capped.iter().find(|(dir, ..)| *dir == function.dir)
        else {
            assert!(reserved.is_none(), "{}", function.logical_id);
            continue;
        };
        let branches = reserved
            .and_then(|r| tagged(r, "If"))
            .and_then(Value::as_sequence)
            .unwrap_or_else(|| {
                panic!(
                    "{}: ReservedConcurrentExecutions: !If [...]",
                    function.logical_id
                )
            });
        assert_eq!(branches[0].as_str(), Some(*condition_name));
        assert_eq!(
            tagged(&branches[1], "Ref").and_then(Value::as_str),
            Some(*parameter_name)
        );
        assert_eq!(
            tagged(&branches[2], "Ref").and_then(Value::as_str),
            Some("AWS::NoValue")
        );
    }
}

#[test]
fn origin_verify_secret_is_generated_and_shared_by_cloudfront_and_the_functions() {
    let template = template();
    let resources = template["Resources"].as_mapping().expect("Resources");
    let secrets: Vec<(&str, &Value)> = resources
        .iter()
        .filter(|(_, r)| r["Type"].as_str() == Some("AWS::SecretsManager::Secret"))
        .map(|(id, r)| (str_of(id, "logical id"), r))
        .collect();
    assert_eq!(secrets.len(), 1, "one origin-verify secret");
    let (secret_id, secret) = secrets[0];
    let generate = &secret["Properties"]["GenerateSecretString"];
    assert!(generate["PasswordLength"].as_u64().unwrap_or(0) >= 32);
    // Punctuation could include characters that do not survive a header value.
    assert_eq!(generate["ExcludePunctuation"].as_bool(), Some(true));
    assert!(secret["Properties"].get("SecretString").is_none());
    let reference = format!("{{{{resolve:secretsmanager:${{{secret_id}}}:SecretString}}}}");

    // Every function gets it (Globals), resolved at deploy time.
    assert_eq!(
        tagged(&globals_value(&template, "SITEHOST_ORIGIN_VERIFY"), "Sub").and_then(Value::as_str),
        Some(reference.as_str())
    );
    for function in functions(&template) {
        assert!(
            !function.environment().contains("SITEHOST_ORIGIN_VERIFY"),
            "{}: set only in Globals",
            function.logical_id
        );
    }

    // CloudFront sends the same value to the API origin, in the header the code reads.
    let config = &template["Resources"]["Distribution"]["Properties"]["DistributionConfig"];
    let api = config["Origins"]
        .as_sequence()
        .expect("Origins")
        .iter()
        .find(|o| o["Id"].as_str() == Some("api"))
        .expect("the api origin");
    let headers = api["OriginCustomHeaders"]
        .as_sequence()
        .expect("OriginCustomHeaders on the api origin");
    let header = headers
        .iter()
        .find(|h| {
            h["HeaderName"].as_str().is_some_and(|n| {
                n.eq_ignore_ascii_case(sitehost::auth::origin::ORIGIN_VERIFY_HEADER)
            })
        })
        .expect("the origin-verify header");
    assert_eq!(
        tagged(&header["HeaderValue"], "Sub").and_then(Value::as_str),
        Some(reference.as_str())
    );
    // The files origin never sees it.
    for origin in config["Origins"].as_sequence().expect("Origins") {
        if origin["Id"].as_str() != Some("api") {
            assert!(origin.get("OriginCustomHeaders").is_none());
        }
    }
}

#[test]
fn files_are_nosniff_and_custom_domains_need_tls_1_2() {
    let template = template();
    let resources = &template["Resources"];
    let config = &resources["Distribution"]["Properties"]["DistributionConfig"];
    let mut behaviours = vec![&config["DefaultCacheBehavior"]];
    behaviours.extend(
        config["CacheBehaviors"]
            .as_sequence()
            .expect("CacheBehaviors"),
    );
    for behaviour in behaviours {
        let policy = referenced(
            resources,
            &behaviour["ResponseHeadersPolicyId"],
            "AWS::CloudFront::ResponseHeadersPolicy",
        );
        let security =
            &policy["Properties"]["ResponseHeadersPolicyConfig"]["SecurityHeadersConfig"];
        assert_eq!(
            security["ContentTypeOptions"]["Override"].as_bool(),
            Some(true),
            "X-Content-Type-Options: nosniff, replacing any the origin sent"
        );
    }
    // The files (default behaviour) come from the bucket.
    assert_eq!(
        config["DefaultCacheBehavior"]["TargetOriginId"].as_str(),
        Some("files")
    );

    // With a custom domain: its certificate, SNI, TLS 1.2 at least. Without one, the
    // cloudfront.net certificate (whose minimum CloudFront sets).
    let branches = tagged(&config["ViewerCertificate"], "If")
        .and_then(Value::as_sequence)
        .expect("ViewerCertificate: !If [HasCustomDomain, ...]");
    assert_eq!(branches[0].as_str(), Some("HasCustomDomain"));
    let custom = &branches[1];
    let minimum = custom["MinimumProtocolVersion"]
        .as_str()
        .expect("MinimumProtocolVersion");
    assert!(
        minimum.starts_with("TLSv1.2_") || minimum.starts_with("TLSv1.3_"),
        "{minimum}"
    );
    assert_eq!(custom["SslSupportMethod"].as_str(), Some("sni-only"));
    assert_eq!(
        tagged(&custom["AcmCertificateArn"], "Ref").and_then(Value::as_str),
        Some("CertificateArn")
    );
    assert_eq!(
        branches[2]["CloudFrontDefaultCertificate"].as_bool(),
        Some(true)
    );
    // CloudFront to the API: TLS 1.2 only.
    let api = config["Origins"]
        .as_sequence()
        .expect("Origins")
        .iter()
        .find(|o| o["Id"].as_str() == Some("api"))
        .expect("api origin");
    assert_eq!(
        api["CustomOriginConfig"]["OriginSSLProtocols"]
            .as_sequence()
            .map(|l| l.iter().filter_map(Value::as_str).collect::<Vec<_>>()),
        Some(vec!["TLSv1.2"])
    );
}

#[test]
fn cloudfront_forwards_what_signatures_need() {
    let template = template();
    let resources = &template["Resources"];
    let config = &resources["Distribution"]["Properties"]["DistributionConfig"];
    let behaviours = config["CacheBehaviors"]
        .as_sequence()
        .expect("CacheBehaviors");
    let api = behaviours
        .iter()
        .find(|b| b["PathPattern"].as_str() == Some("/api/*"))
        .expect("an /api/* cache behaviour");
    assert_eq!(api["CachePolicyId"].as_str(), Some(CACHING_DISABLED));
    assert_eq!(
        api["OriginRequestPolicyId"].as_str(),
        Some(ALL_VIEWER_EXCEPT_HOST_HEADER)
    );
    // Both protocols reach the function, which refuses plain HTTP itself (below): a redirect
    // would break the signature, `https-only` answers CloudFront's HTML page.
    assert_eq!(api["ViewerProtocolPolicy"].as_str(), Some("allow-all"));
    let methods: BTreeSet<&str> = api["AllowedMethods"]
        .as_sequence()
        .expect("AllowedMethods")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for method in ["GET", "POST", "PUT"] {
        assert!(methods.contains(method), "/api/* does not allow {method}");
    }
    // The origin is the HTTP API.
    let origin_id = str_of(&api["TargetOriginId"], "TargetOriginId");
    let origin = config["Origins"]
        .as_sequence()
        .expect("Origins")
        .iter()
        .find(|o| o["Id"].as_str() == Some(origin_id))
        .expect("the /api/* origin");
    let domain = tagged(&origin["DomainName"], "Sub")
        .and_then(Value::as_str)
        .expect("the API origin's DomainName is a !Sub");
    assert!(domain.starts_with("${HttpApi}.execute-api."), "{domain}");

    // The viewer-request function copies Host into X-Forwarded-Host.
    let association = api["FunctionAssociations"]
        .as_sequence()
        .expect("FunctionAssociations")
        .iter()
        .find(|a| a["EventType"].as_str() == Some("viewer-request"))
        .expect("a viewer-request function on /api/*");
    let get_att = tagged(&association["FunctionARN"], "GetAtt")
        .and_then(Value::as_str)
        .expect("FunctionARN is a !GetAtt");
    let function_id = get_att
        .strip_suffix(".FunctionMetadata.FunctionARN")
        .expect("!GetAtt <Function>.FunctionMetadata.FunctionARN");
    let code = str_of(
        &resources[function_id]["Properties"]["FunctionCode"],
        "FunctionCode",
    );
    assert!(code.contains("x-forwarded-host") && code.contains("'host'"));
    assert!(code.contains("x-forwarded-proto"));
    assert!(code.contains("cloudfront-forwarded-proto"));
    assert_eq!(
        resources[function_id]["Properties"]["FunctionConfig"]["Runtime"].as_str(),
        Some("cloudfront-js-2.0"),
        "a response body from a viewer-request function needs cloudfront-js-2.0"
    );
    check_function_code_with_node(code);
}

/// Runs the CloudFront Function's code with node, when node is installed: an https://
/// request passes with the forwarded headers set, an http:// one is answered with our JSON
/// error.
fn check_function_code_with_node(code: &str) {
    let script = format!(
        "{code}\n\
         function viewer(proto) {{\n\
           return handler({{request: {{method: 'GET', uri: '/api/v2/businesses/', headers: {{\
             host: {{value: 'd111111abcdef8.cloudfront.net'}}, \
             'cloudfront-forwarded-proto': {{value: proto}}, \
             'x-forwarded-host': {{value: 'spoofed.example'}}, \
             'x-forwarded-proto': {{value: 'http'}}}}}}}});\n\
         }}\n\
         console.log(JSON.stringify({{https: viewer('https'), http: viewer('http')}}));\n"
    );
    let Some(out) = crate::support::node::run_json(&script) else {
        return;
    };
    // https: the request goes on, with the host the partner called.
    let passed = &out["https"];
    assert!(passed.get("statusCode").is_none(), "{passed}");
    let headers = &passed["headers"];
    assert_eq!(
        headers["x-forwarded-host"]["value"], "d111111abcdef8.cloudfront.net",
        "{headers}"
    );
    assert_eq!(headers["host"]["value"], "d111111abcdef8.cloudfront.net");
    assert_eq!(headers["x-forwarded-proto"]["value"], "https", "{headers}");
    // http: answered at the edge in our error shape.
    let refused = &out["http"];
    assert_eq!(refused["statusCode"], 403, "{refused}");
    assert_eq!(
        refused["headers"]["content-type"]["value"],
        "application/json"
    );
    assert_eq!(refused["body"]["encoding"], "text");
    let body: serde_json::Value = serde_json::from_str(
        refused["body"]["data"]
            .as_str()
            .expect("the body is a string"),
    )
    .expect("the body is JSON");
    let message = body["error"].as_str().expect("{\"error\": \"...\"}");
    assert!(message.contains("https://"), "{message}");
    assert_eq!(body.as_object().map(|o| o.len()), Some(1), "{body}");
}

/// Every unmatched request (unknown path, a method the path lacks) is routed to one
/// function, whose handler answers before authentication with the router's 404 or 405.
#[test]
fn unmatched_requests_reach_a_function_that_answers_our_404_and_405() {
    let template = template();
    let owners: Vec<(String, Operation)> = functions(&template)
        .iter()
        .filter(|f| {
            f.all_routes()
                .iter()
                .any(|(method, path)| path == "$default" && method == "ANY")
        })
        .map(|f| (f.logical_id.clone(), operation_for_dir(&f.dir)))
        .collect();
    assert_eq!(owners.len(), 1, "one function serves $default: {owners:?}");
    // A read-only operation: nothing it could do for a stray request changes state.
    assert!(!owners[0].1.writes(), "{owners:?}");
    // What reaches it: unknown paths are 404, known paths with another method are 405.
    for path in [
        "/api/v2/nothing/",
        "/api/v1/businesses/",
        "/",
        "/api/v2/businesses/1/x/",
    ] {
        assert!(
            matches!(
                route(&Method::GET, path),
                Err(sitehost::error::ApiError::NotFound(_))
            ),
            "{path}"
        );
    }
    for (method, path) in [
        (Method::DELETE, "/api/v2/businesses/1/"),
        (Method::GET, "/api/v2/business/"),
        (Method::PATCH, "/api/v2/images/"),
    ] {
        assert!(
            matches!(
                route(&method, path),
                Err(sitehost::error::ApiError::MethodNotAllowed(_))
            ),
            "{method} {path}"
        );
    }
}

/// CloudFront replaces only the origin failures our functions never answer (502, 504) with
/// a JSON error object in our shape, never our own 4xx, 500 or 503 JSON answers (a 503
/// carries `Retry-After`, which a custom error page would drop).
#[test]
fn origin_failures_are_answered_with_our_json_error() {
    let template = template();
    let config = &template["Resources"]["Distribution"]["Properties"]["DistributionConfig"];
    let responses = config["CustomErrorResponses"]
        .as_sequence()
        .expect("CustomErrorResponses");
    let mut codes = BTreeSet::new();
    for response in responses {
        let code = response["ErrorCode"].as_u64().expect("ErrorCode");
        codes.insert(code);
        assert_eq!(
            response["ResponseCode"].as_u64(),
            Some(code),
            "{code}: same status"
        );
        assert_eq!(
            response["ErrorCachingMinTTL"].as_u64(),
            Some(0),
            "{code}: not cached"
        );
        let page = str_of(&response["ResponsePagePath"], "ResponsePagePath");
        // Served from the bucket (the default behaviour), never from the API.
        assert!(!page.starts_with("/api/"), "{page}");
        let file = workspace_root().join(page.trim_start_matches('/'));
        let text = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("{page}: {} ({e})", file.display()));
        let body: serde_json::Value = serde_json::from_str(&text).expect("a JSON error object");
        assert!(body["error"].is_string(), "{body}");
        assert_eq!(body.as_object().map(|o| o.len()), Some(1), "{body}");
    }
    assert_eq!(codes, BTreeSet::from([502, 504]));
}

/// Every `AWS::CloudWatch::Alarm` of the template: (logical id, resource).
fn alarms(template: &Value) -> BTreeMap<String, Value> {
    template["Resources"]
        .as_mapping()
        .expect("Resources")
        .iter()
        .filter(|(_, r)| r["Type"].as_str() == Some("AWS::CloudWatch::Alarm"))
        .map(|(id, r)| (str_of(id, "logical id").to_string(), r.clone()))
        .collect()
}

/// `[{Name, Value}]` dimensions as (name, value) pairs; a `!Ref X` value is `!Ref X`.
fn dimensions(dimensions: &Value) -> BTreeSet<(String, String)> {
    dimensions
        .as_sequence()
        .map(|dims| {
            dims.iter()
                .map(|d| {
                    let value = match tagged(&d["Value"], "Ref") {
                        Some(target) => format!("!Ref {}", str_of(target, "Ref")),
                        None => str_of(&d["Value"], "dimension value").to_string(),
                    };
                    (str_of(&d["Name"], "dimension name").to_string(), value)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// (namespace, metric name, dimensions) of a metric an alarm reads.
type AlarmMetric = (String, String, BTreeSet<(String, String)>);

/// The metric an alarm watching one metric directly reads.
fn single_metric(alarm: &Value) -> Option<AlarmMetric> {
    let props = &alarm["Properties"];
    Some((
        props["Namespace"].as_str()?.to_string(),
        props["MetricName"].as_str()?.to_string(),
        dimensions(&props["Dimensions"]),
    ))
}

/// The alarms notify `AlarmTopicArn` on ALARM and OK when it is given, and exist without
/// any action when it is empty; they watch the API's 5xx rate (API Gateway's own metric),
/// every function's errors and throttles, the table's throttles and system errors, and
/// CloudFront's 5xx rate where CloudFront's metrics are (us-east-1).
#[test]
fn alarms_watch_the_right_metrics_and_notify_the_topic_when_given() {
    let template = template();
    let parameter = &template["Parameters"]["AlarmTopicArn"];
    assert_eq!(parameter["Type"].as_str(), Some("String"));
    assert_eq!(parameter["Default"].as_str(), Some(""), "optional");
    let has_topic = &template["Conditions"]["HasAlarmTopic"];
    let equals = tagged(has_topic, "Not")
        .and_then(|n| n.get(0))
        .and_then(|e| tagged(e, "Equals"))
        .expect("HasAlarmTopic: !Not [!Equals [...]]");
    assert_eq!(
        tagged(&equals[0], "Ref").and_then(Value::as_str),
        Some("AlarmTopicArn")
    );
    assert_eq!(equals[1].as_str(), Some(""));

    let alarms = alarms(&template);
    for (id, alarm) in &alarms {
        let props = &alarm["Properties"];
        // [!If [HasAlarmEmail, !Ref AlarmTopic, NoValue], !If [HasAlarmTopic, !Ref
        // AlarmTopicArn, NoValue]]: the destinations given, none without either.
        for actions in ["AlarmActions", "OKActions"] {
            let list = props[actions]
                .as_sequence()
                .unwrap_or_else(|| panic!("{id}.{actions}: a list"));
            let choices: Vec<(Option<&str>, Option<&str>, Option<&str>)> = list
                .iter()
                .map(|item| {
                    let choice = tagged(item, "If")
                        .and_then(Value::as_sequence)
                        .unwrap_or_else(|| panic!("{id}.{actions}: !If [...]"));
                    (
                        choice[0].as_str(),
                        tagged(&choice[1], "Ref").and_then(Value::as_str),
                        tagged(&choice[2], "Ref").and_then(Value::as_str),
                    )
                })
                .collect();
            assert_eq!(
                choices,
                [
                    (
                        Some("HasAlarmEmail"),
                        Some("AlarmTopic"),
                        Some("AWS::NoValue")
                    ),
                    (
                        Some("HasAlarmTopic"),
                        Some("AlarmTopicArn"),
                        Some("AWS::NoValue")
                    ),
                ],
                "{id}.{actions}"
            );
        }
        assert_eq!(
            props["TreatMissingData"].as_str(),
            Some("notBreaching"),
            "{id}: no traffic is no alarm"
        );
        assert!(
            props["AlarmDescription"]
                .as_str()
                .is_some_and(|d| d.contains("docs/operations.md#")),
            "{id}: the description names its section of docs/operations.md"
        );
    }

    // The API's 5xx rate: API Gateway's 5xx over its Count, both of this API.
    let api = alarms
        .get("ApiServerErrorRateAlarm")
        .expect("ApiServerErrorRateAlarm");
    let props = &api["Properties"];
    let queries = props["Metrics"].as_sequence().expect("Metrics");
    let stats: BTreeSet<AlarmMetric> = queries
        .iter()
        .filter_map(|q| q.get("MetricStat"))
        .map(|stat| {
            let metric = &stat["Metric"];
            assert_eq!(stat["Stat"].as_str(), Some("Sum"));
            (
                str_of(&metric["Namespace"], "Namespace").to_string(),
                str_of(&metric["MetricName"], "MetricName").to_string(),
                dimensions(&metric["Dimensions"]),
            )
        })
        .collect();
    let api_id = BTreeSet::from([("ApiId".to_string(), "!Ref HttpApi".to_string())]);
    assert_eq!(
        stats,
        BTreeSet::from([
            ("AWS/ApiGateway".into(), "5xx".into(), api_id.clone()),
            ("AWS/ApiGateway".into(), "Count".into(), api_id),
        ])
    );
    let returned: Vec<&Value> = queries
        .iter()
        .filter(|q| q["ReturnData"].as_bool() == Some(true))
        .collect();
    assert_eq!(returned.len(), 1);
    assert!(str_of(&returned[0]["Expression"], "Expression")
        .contains("100 * FILL(errors, 0) / requests"));
    assert_eq!(props["Threshold"].as_f64(), Some(5.0));
    assert_eq!(
        props["ComparisonOperator"].as_str(),
        Some("GreaterThanThreshold")
    );

    // Every function: Errors and Throttles, at the first one.
    let functions = functions(&template);
    for function in &functions {
        for metric in ["Errors", "Throttles"] {
            let dims = BTreeSet::from([(
                "FunctionName".to_string(),
                format!("!Ref {}", function.logical_id),
            )]);
            let watching: Vec<&Value> = alarms
                .values()
                .filter(|a| {
                    single_metric(a) == Some(("AWS/Lambda".into(), metric.into(), dims.clone()))
                })
                .collect();
            assert_eq!(
                watching.len(),
                1,
                "{}: one {metric} alarm",
                function.logical_id
            );
            let props = &watching[0]["Properties"];
            assert_eq!(props["Statistic"].as_str(), Some("Sum"));
            assert_eq!(props["Threshold"].as_f64(), Some(1.0));
            assert_eq!(
                props["ComparisonOperator"].as_str(),
                Some("GreaterThanOrEqualToThreshold")
            );
        }
    }

    // The table: every operation's ThrottledRequests and SystemErrors (a Metrics Insights
    // query over the table's name), at the first one.
    for metric in ["ThrottledRequests", "SystemErrors"] {
        let watching: Vec<&Value> = alarms
            .values()
            .filter(|a| {
                a["Properties"]["Metrics"]
                    .as_sequence()
                    .into_iter()
                    .flatten()
                    .filter_map(|q| tagged(&q["Expression"], "Sub"))
                    .filter_map(Value::as_str)
                    .any(|e| {
                        e == format!(
                            "SELECT SUM({metric}) FROM SCHEMA(\"AWS/DynamoDB\", Operation, \
                             TableName) WHERE TableName = '${{RecordsTable}}'"
                        )
                    })
            })
            .collect();
        assert_eq!(watching.len(), 1, "one {metric} alarm on RecordsTable");
        let props = &watching[0]["Properties"];
        assert_eq!(props["Threshold"].as_f64(), Some(1.0));
        assert_eq!(
            props["ComparisonOperator"].as_str(),
            Some("GreaterThanOrEqualToThreshold")
        );
    }

    // CloudFront: its metrics live in us-east-1 only, so the alarm exists only there.
    let cloudfront: Vec<&Value> = alarms
        .values()
        .filter(|a| {
            single_metric(a)
                == Some((
                    "AWS/CloudFront".into(),
                    "5xxErrorRate".into(),
                    BTreeSet::from([
                        (
                            "DistributionId".to_string(),
                            "!Ref Distribution".to_string(),
                        ),
                        ("Region".to_string(), "Global".to_string()),
                    ]),
                ))
        })
        .collect();
    assert_eq!(cloudfront.len(), 1, "one CloudFront 5xxErrorRate alarm");
    let condition = str_of(&cloudfront[0]["Condition"], "CloudFront alarm Condition");
    let equals = tagged(&template["Conditions"][condition], "Equals").expect("!Equals");
    assert_eq!(
        tagged(&equals[0], "Ref").and_then(Value::as_str),
        Some("AWS::Region")
    );
    assert_eq!(equals[1].as_str(), Some("us-east-1"));
    assert_eq!(cloudfront[0]["Properties"]["Threshold"].as_f64(), Some(5.0));

    assert_eq!(
        alarms.len(),
        1 + 2 * functions.len() + 2 + 1,
        "an alarm this test does not know: {:?}",
        alarms.keys()
    );
}

/// One metric row of a dashboard widget: namespace, name, dimension pairs and its stat
/// (the row's own or the widget's).
struct DashboardMetric {
    namespace: String,
    name: String,
    dimensions: Vec<(String, String)>,
    stat: String,
    region: String,
}

fn dashboard_metrics(template: &Value) -> (Vec<DashboardMetric>, Vec<String>) {
    let body = tagged(
        &template["Resources"]["Dashboard"]["Properties"]["DashboardBody"],
        "Sub",
    )
    .and_then(Value::as_str)
    .expect("Dashboard.DashboardBody: !Sub \"...\"");
    let body: serde_json::Value = serde_json::from_str(body).expect("the dashboard is JSON");
    let mut metrics = Vec::new();
    let mut expressions = Vec::new();
    for widget in body["widgets"].as_array().expect("widgets") {
        let props = &widget["properties"];
        for row in props["metrics"].as_array().into_iter().flatten() {
            let row = row.as_array().expect("a metric row is an array");
            let strings: Vec<String> = row
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect();
            let options = row.iter().find(|v| v.is_object());
            if let Some(expression) = options.and_then(|o| o["expression"].as_str()) {
                expressions.push(expression.to_string());
                continue;
            }
            assert!(
                strings.len() >= 2 && strings.len().is_multiple_of(2),
                "{row:?}"
            );
            metrics.push(DashboardMetric {
                namespace: strings[0].clone(),
                name: strings[1].clone(),
                dimensions: strings[2..]
                    .chunks(2)
                    .map(|pair| (pair[0].clone(), pair[1].clone()))
                    .collect(),
                stat: options
                    .and_then(|o| o["stat"].as_str())
                    .or(props["stat"].as_str())
                    .expect("a stat")
                    .to_string(),
                region: props["region"].as_str().expect("a region").to_string(),
            });
        }
    }
    (metrics, expressions)
}

/// The dashboard reads the metrics the code emits (names, units' namespace, the operation
/// dimension and its values all come from `sitehost::api::request_log`), in the namespace the
/// functions are given, and every function's, the table's and CloudFront's figures.
#[test]
fn the_dashboard_shows_the_metrics_the_code_emits() {
    use sitehost::api::request_log::{self, operation_name, DIMENSION, METRICS};
    use sitehost::config::METRICS_NAMESPACE_VAR;
    let template = template();
    let namespace = tagged(&globals_value(&template, METRICS_NAMESPACE_VAR), "Sub")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| panic!("Globals sets {METRICS_NAMESPACE_VAR} with !Sub"));
    assert_eq!(
        namespace, "sitehost/${AWS::StackName}",
        "one namespace per stack"
    );
    let operations: Vec<&str> = Operation::ALL
        .into_iter()
        .map(|op| {
            // The dimension value is the function's name.
            assert_eq!(operation_name(Some(op)), op.function_name());
            operation_name(Some(op))
        })
        .collect();

    let (metrics, expressions) = dashboard_metrics(&template);
    let ours: Vec<&DashboardMetric> = metrics
        .iter()
        .filter(|m| m.namespace.starts_with("sitehost"))
        .collect();
    for metric in &ours {
        assert_eq!(metric.namespace, namespace);
        assert!(
            METRICS.iter().any(|m| m.name == metric.name),
            "the dashboard reads {}, which the code does not emit",
            metric.name
        );
        assert_eq!(metric.dimensions.len(), 1, "{}", metric.name);
        let (key, value) = &metric.dimensions[0];
        assert_eq!(key, DIMENSION);
        assert!(
            operations.contains(&value.as_str()) || value == request_log::UNROUTED,
            "{value} is no operation"
        );
        assert_eq!(metric.region, "${AWS::Region}");
    }
    let shows = |name: &str, operation: &str, stat: &str| {
        ours.iter()
            .any(|m| m.name == name && m.dimensions[0].1 == operation && m.stat == stat)
    };
    for operation in &operations {
        for (metric, stat) in [
            (request_log::REQUESTS, "Sum"),
            (request_log::STATUS_4XX, "Sum"),
            (request_log::STATUS_5XX, "Sum"),
            (request_log::LATENCY, "p50"),
            (request_log::LATENCY, "p99"),
        ] {
            assert!(
                shows(metric.name, operation, stat),
                "no {stat} of {} for {operation}",
                metric.name
            );
        }
    }
    for metric in [request_log::UPLOAD_BYTES, request_log::PIPELINE_TIME] {
        for stat in ["p50", "p99"] {
            assert!(
                shows(metric.name, "image-upload", stat),
                "{stat} {}",
                metric.name
            );
        }
    }

    let has = |namespace: &str, name: &str, dimension: (&str, &str)| {
        metrics.iter().any(|m| {
            m.namespace == namespace
                && m.name == name
                && m.dimensions == [(dimension.0.to_string(), dimension.1.to_string())]
        })
    };
    for function in functions(&template) {
        let reference = format!("${{{}}}", function.logical_id);
        for name in ["Errors", "Throttles", "Duration"] {
            assert!(
                has("AWS/Lambda", name, ("FunctionName", &reference)),
                "no {name} of {}",
                function.logical_id
            );
        }
    }
    for name in ["ConsumedReadCapacityUnits", "ConsumedWriteCapacityUnits"] {
        assert!(
            has("AWS/DynamoDB", name, ("TableName", "${RecordsTable}")),
            "{name}"
        );
    }
    for name in ["ThrottledRequests", "SystemErrors"] {
        assert!(
            expressions
                .iter()
                .any(|e| e.contains(&format!("SUM({name})"))
                    && e.contains("WHERE TableName = '${RecordsTable}'")),
            "no {name} of the table in {expressions:?}"
        );
    }
    for name in ["Count", "4xx", "5xx"] {
        assert!(
            has("AWS/ApiGateway", name, ("ApiId", "${HttpApi}")),
            "{name}"
        );
    }
    let cloudfront = metrics
        .iter()
        .find(|m| m.namespace == "AWS/CloudFront" && m.name == "5xxErrorRate")
        .expect("CloudFront 5xxErrorRate");
    assert_eq!(
        cloudfront.region, "us-east-1",
        "CloudFront's metrics live there only"
    );
    assert_eq!(
        cloudfront.dimensions,
        [
            ("DistributionId".to_string(), "${Distribution}".to_string()),
            ("Region".to_string(), "Global".to_string())
        ]
    );
}

/// docs/operations.md restores the table to a point in time: the template keeps that
/// possible.
#[test]
fn the_records_table_has_point_in_time_recovery() {
    let template = template();
    let table = &template["Resources"]["RecordsTable"]["Properties"];
    assert_eq!(
        table["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"].as_bool(),
        Some(true)
    );
}

/// The throttling parameters, each with the default docs/deploy.md ("Capacity and limits")
/// derives: (rate parameter, its default, burst parameter, its default).
const THROTTLES: &[(&str, u64, &str, u64)] = &[
    // Stray requests ($default) and any route without a setting of its own.
    (
        "ApiThrottlingRateLimit",
        100,
        "ApiThrottlingBurstLimit",
        100,
    ),
    // Four accounts reading at 1,000/s, or 200 keys at the default 20/s.
    (
        "ReadThrottlingRateLimit",
        4000,
        "ReadThrottlingBurstLimit",
        4000,
    ),
    // Three accounts at the 1,000 creates/s the store is built to sustain per account.
    (
        "WriteThrottlingRateLimit",
        3000,
        "WriteThrottlingBurstLimit",
        3000,
    ),
    // ImageUploadReservedConcurrency (10) / about 2 s per upload; burst: the concurrency.
    (
        "UploadThrottlingRateLimit",
        5,
        "UploadThrottlingBurstLimit",
        10,
    ),
];

/// API Gateway's default quota per account and region (all APIs): 10,000 requests/s, burst
/// 5,000.
const ACCOUNT_RATE: u64 = 10_000;
const ACCOUNT_BURST: u64 = 5_000;

/// Seconds a typical upload holds an image-upload instance (fetch, decode, five variants,
/// six S3 writes, one transaction): what the upload route's default rate assumes.
const SECONDS_PER_UPLOAD: u64 = 2;

fn parameter_default(template: &Value, name: &str) -> u64 {
    let parameter = &template["Parameters"][name];
    assert_eq!(parameter["Type"].as_str(), Some("Number"), "{name}");
    parameter["Default"]
        .as_u64()
        .unwrap_or_else(|| panic!("{name}: a numeric default"))
}

/// The throttling group of a route: the prefix of its `<group>ThrottlingRateLimit` and
/// `<group>ThrottlingBurstLimit` parameters.
fn throttle_group(operation: Operation) -> &'static str {
    match operation {
        Operation::BusinessList
        | Operation::BusinessGet
        | Operation::ImageList
        | Operation::ImageGet
        | Operation::LocationList
        | Operation::LocationGet
        | Operation::SiteList
        | Operation::SiteGet
        | Operation::PostList
        | Operation::PostGet => "Read",
        Operation::BusinessCreate
        | Operation::BusinessUpdate
        | Operation::ImageDelete
        | Operation::LocationCreate
        | Operation::LocationUpdate
        | Operation::LocationDelete
        | Operation::SiteCreate
        | Operation::SiteUpdate
        | Operation::SiteDelete
        | Operation::PostCreate
        | Operation::PostUpdate => "Write",
        Operation::ImageUpload | Operation::ImageUploadSession => "Upload",
    }
}

/// `{ThrottlingRateLimit: !Ref <group>ThrottlingRateLimit, ThrottlingBurstLimit: !Ref ...}`.
fn assert_throttled_by(settings: &Value, group: &str, what: &str) {
    for (property, suffix) in [
        ("ThrottlingRateLimit", "ThrottlingRateLimit"),
        ("ThrottlingBurstLimit", "ThrottlingBurstLimit"),
    ] {
        assert_eq!(
            tagged(&settings[property], "Ref").and_then(Value::as_str),
            Some(format!("{group}{suffix}").as_str()),
            "{what}: {property} must be !Ref {group}{suffix}"
        );
    }
}

#[test]
fn throttle_parameters_are_sized_from_capacity() {
    let template = template();
    for &(rate, rate_default, burst, burst_default) in THROTTLES {
        for (name, default) in [(rate, rate_default), (burst, burst_default)] {
            let parameter = &template["Parameters"][name];
            assert_eq!(parameter_default(&template, name), default, "{name}");
            // 0 would throttle every request of the route.
            assert_eq!(parameter["MinValue"].as_u64(), Some(1), "{name}");
            assert!(
                parameter["Description"]
                    .as_str()
                    .is_some_and(|d| d.len() > 20),
                "{name}: say what it limits"
            );
        }
        // No one group's route may take most of the account's quota (shared by every API
        // of the account in the region), nor a burst beyond the account's.
        assert!(rate_default <= ACCOUNT_RATE / 2, "{rate}: {rate_default}");
        assert!(burst_default <= ACCOUNT_BURST, "{burst}: {burst_default}");
    }
    // The old single 50/s limit capped every partner together below one account's target.
    for name in ["ReadThrottlingRateLimit", "WriteThrottlingRateLimit"] {
        assert!(
            parameter_default(&template, name) >= 1_000,
            "{name}: at least the 1,000 creates/s one account is built to sustain"
        );
    }
    // Uploads: no more per second than image-upload's reserved concurrency finishes, and
    // no bigger burst than it can start, so the excess is API Gateway's 429 and not a
    // throttled Lambda's 500.
    let concurrency = parameter_default(&template, "ImageUploadReservedConcurrency");
    assert!(
        parameter_default(&template, "UploadThrottlingRateLimit") * SECONDS_PER_UPLOAD
            <= concurrency
    );
    assert!(parameter_default(&template, "UploadThrottlingBurstLimit") <= concurrency);
}

#[test]
fn every_route_is_throttled_by_its_group() {
    let template = template();
    let api = &template["Resources"]["HttpApi"]["Properties"];
    // The stage default: for any route without a setting of its own.
    assert_throttled_by(&api["DefaultRouteSettings"], "Api", "DefaultRouteSettings");

    let settings = api["RouteSettings"]
        .as_mapping()
        .expect("HttpApi.RouteSettings, keyed by route key");
    let mut expected = BTreeSet::new();
    for function in api_functions(&template) {
        let group = throttle_group(operation_for_dir(&function.dir));
        for (method, path) in function.all_routes() {
            // SAM and API Gateway spell route keys `METHOD /path`, and `$default`.
            let (key, group) = if path == "$default" {
                ("$default".to_string(), "Api")
            } else {
                (format!("{method} {path}"), group)
            };
            let setting = settings
                .get(Value::String(key.clone()))
                .unwrap_or_else(|| panic!("RouteSettings has no {key:?} ({})", function.dir));
            assert_throttled_by(setting, group, &key);
            expected.insert(key);
        }
    }
    // A key without a route fails the deployment ("Unable to find Route by key").
    let keys: BTreeSet<String> = settings
        .keys()
        .map(|k| str_of(k, "route key").to_string())
        .collect();
    assert_eq!(
        keys, expected,
        "RouteSettings keys are exactly the API's routes"
    );
    assert!(keys.contains("$default"));
}

/// `!Not [!Equals [!Ref <parameter>, <value>]]`: the parameter and the value.
pub(crate) fn not_equals(condition: &Value) -> (String, Value) {
    let not = tagged(condition, "Not")
        .and_then(Value::as_sequence)
        .expect("!Not [...]");
    let equals = tagged(&not[0], "Equals")
        .and_then(Value::as_sequence)
        .expect("!Not [!Equals [...]]");
    let name = tagged(&equals[0], "Ref")
        .and_then(Value::as_str)
        .expect("!Equals [!Ref ..., ...]");
    (name.to_string(), equals[1].clone())
}

/// `0` or `"0"`: how CloudFormation compares a Number parameter.
fn is_zero(value: &Value) -> bool {
    value.as_u64() == Some(0) || value.as_str() == Some("0")
}

/// `!Equals [!Ref "AWS::Region", us-east-1]`.
fn is_us_east_1(condition: &Value) -> bool {
    tagged(condition, "Equals")
        .and_then(Value::as_sequence)
        .is_some_and(|e| {
            tagged(&e[0], "Ref").and_then(Value::as_str) == Some("AWS::Region")
                && e[1].as_str() == Some("us-east-1")
        })
}

#[test]
fn the_web_acl_exists_only_when_asked_for_and_only_in_us_east_1() {
    let template = template();
    let parameters = &template["Parameters"];
    let limit = &parameters["WafRateLimitPerIp"];
    assert_eq!(limit["Type"].as_str(), Some("Number"));
    assert_eq!(limit["Default"].as_u64(), Some(0), "off unless asked for");
    assert_eq!(limit["MinValue"].as_u64(), Some(0));
    assert_eq!(parameters["WebAclArn"]["Default"].as_str(), Some(""));

    // CreateWebAcl: the parameter is not 0, and the stack is in us-east-1 (the only region
    // where a CLOUDFRONT-scope web ACL can be created).
    let conditions = &template["Conditions"];
    let and = tagged(&conditions["CreateWebAcl"], "And")
        .and_then(Value::as_sequence)
        .expect("CreateWebAcl: !And [...]");
    assert_eq!(and.len(), 2);
    let (name, value) = not_equals(&and[0]);
    assert_eq!(name, "WafRateLimitPerIp");
    assert!(is_zero(&value), "{value:?}");
    assert!(is_us_east_1(&and[1]), "{:?}", and[1]);
    let (name, value) = not_equals(&conditions["HasWebAclArn"]);
    assert_eq!(name, "WebAclArn");
    assert_eq!(value.as_str(), Some(""));

    // Every WAF resource is created under that condition only.
    let resources = template["Resources"].as_mapping().expect("Resources");
    let waf: Vec<(&str, &Value)> = resources
        .iter()
        .filter(|(_, r)| {
            r["Type"]
                .as_str()
                .is_some_and(|t| t.starts_with("AWS::WAFv2::"))
        })
        .map(|(id, r)| (str_of(id, "logical id"), r))
        .collect();
    for (id, resource) in &waf {
        assert_eq!(resource["Condition"].as_str(), Some("CreateWebAcl"), "{id}");
    }
    let acls: Vec<&(&str, &Value)> = waf
        .iter()
        .filter(|(_, r)| r["Type"].as_str() == Some("AWS::WAFv2::WebACL"))
        .collect();
    assert_eq!(acls.len(), 1, "one web ACL: {waf:?}");
    let (id, acl) = *acls[0];
    assert_eq!(id, "ApiWebAcl");
    assert_eq!(acl["Type"].as_str(), Some("AWS::WAFv2::WebACL"));
    assert_eq!(acl["Condition"].as_str(), Some("CreateWebAcl"));
    assert_eq!(acl["Properties"]["Scope"].as_str(), Some("CLOUDFRONT"));
    // Everything not rate limited passes.
    assert!(acl["Properties"]["DefaultAction"].get("Allow").is_some());

    // Asked for elsewhere, the deployment is refused before anything changes (Rules), not
    // silently left unprotected; and the two ways of attaching an ACL exclude each other.
    let rules = &template["Rules"];
    for (rule, asserted) in [
        ("WebAclNeedsUsEast1", "region"),
        ("OneWebAcl", "no WebAclArn"),
    ] {
        let (name, value) = not_equals(&rules[rule]["RuleCondition"]);
        assert_eq!(name, "WafRateLimitPerIp", "{rule}");
        assert!(is_zero(&value), "{rule}: {value:?}");
        let assertions = rules[rule]["Assertions"]
            .as_sequence()
            .unwrap_or_else(|| panic!("{rule}: Assertions"));
        assert_eq!(assertions.len(), 1, "{rule}");
        let assert = &assertions[0]["Assert"];
        if asserted == "region" {
            assert!(is_us_east_1(assert), "{rule}: {assert:?}");
        } else {
            let equals = tagged(assert, "Equals")
                .and_then(Value::as_sequence)
                .unwrap_or_else(|| panic!("{rule}: !Equals"));
            assert_eq!(
                tagged(&equals[0], "Ref").and_then(Value::as_str),
                Some("WebAclArn")
            );
            assert_eq!(equals[1].as_str(), Some(""));
        }
        assert!(assertions[0]["AssertDescription"].is_string(), "{rule}");
    }
}

#[test]
fn the_distribution_attaches_a_web_acl_only_when_enabled() {
    let template = template();
    let config = &template["Resources"]["Distribution"]["Properties"]["DistributionConfig"];
    // !If [HasWebAclArn, !Ref WebAclArn, !If [CreateWebAcl, !GetAtt ApiWebAcl.Arn, NoValue]]
    let outer = tagged(&config["WebACLId"], "If")
        .and_then(Value::as_sequence)
        .expect("WebACLId: !If [...]");
    assert_eq!(outer[0].as_str(), Some("HasWebAclArn"));
    assert_eq!(
        tagged(&outer[1], "Ref").and_then(Value::as_str),
        Some("WebAclArn")
    );
    let inner = tagged(&outer[2], "If")
        .and_then(Value::as_sequence)
        .expect("!If [CreateWebAcl, ...]");
    assert_eq!(inner[0].as_str(), Some("CreateWebAcl"));
    // WAFv2 web ACLs are attached by ARN (an ID is WAF Classic's).
    assert_eq!(
        tagged(&inner[1], "GetAtt").and_then(Value::as_str),
        Some("ApiWebAcl.Arn")
    );
    assert_eq!(
        tagged(&inner[2], "Ref").and_then(Value::as_str),
        Some("AWS::NoValue")
    );
}

/// What a WAF statement inspects of a request, for the statements the template uses.
struct ViewerRequest<'a> {
    path: &'a str,
    query: &'a str,
    authorization: Option<&'a str>,
}

fn transformed(text: &str, transformations: &Value) -> String {
    let mut steps: Vec<&Value> = transformations
        .as_sequence()
        .expect("TextTransformations")
        .iter()
        .collect();
    steps.sort_by_key(|t| t["Priority"].as_u64());
    let mut text = text.to_string();
    for step in steps {
        text = match step["Type"].as_str() {
            Some("NONE") => text,
            Some("LOWERCASE") => text.to_lowercase(),
            Some("URL_DECODE") => percent_encoding::percent_decode_str(&text)
                .decode_utf8_lossy()
                .into_owned(),
            other => panic!("TextTransformation {other:?}: teach this test"),
        };
    }
    text
}

/// Whether a WAF statement matches the request (the subset of WAF the template uses; any
/// other statement fails the test rather than being guessed at).
fn waf_matches(statement: &Value, request: &ViewerRequest) -> bool {
    if let Some(and) = statement.get("AndStatement") {
        let all = and["Statements"].as_sequence().expect("Statements");
        return all.iter().all(|s| waf_matches(s, request));
    }
    if let Some(or) = statement.get("OrStatement") {
        let any = or["Statements"].as_sequence().expect("Statements");
        return any.iter().any(|s| waf_matches(s, request));
    }
    if let Some(not) = statement.get("NotStatement") {
        return !waf_matches(&not["Statement"], request);
    }
    let byte_match = statement
        .get("ByteMatchStatement")
        .unwrap_or_else(|| panic!("statement {statement:?}: teach this test"));
    let field = &byte_match["FieldToMatch"];
    let value = if field.get("UriPath").is_some() {
        Some(request.path)
    } else if field.get("QueryString").is_some() {
        Some(request.query)
    } else if let Some(header) = field.get("SingleHeader") {
        let name = header["Name"].as_str().expect("header name");
        assert_eq!(name, "authorization", "the only header inspected");
        request.authorization
    } else {
        panic!("FieldToMatch {field:?}: teach this test")
    };
    // A header the request lacks matches nothing.
    let Some(value) = value else {
        return false;
    };
    let value = transformed(value, &byte_match["TextTransformations"]);
    let search = str_of(&byte_match["SearchString"], "SearchString");
    match byte_match["PositionalConstraint"].as_str() {
        Some("STARTS_WITH") => value.starts_with(search),
        Some("CONTAINS") => value.contains(search),
        Some("EXACTLY") => value == search,
        other => panic!("PositionalConstraint {other:?}: teach this test"),
    }
}

#[test]
fn the_waf_rule_rate_limits_unsigned_api_requests_per_ip() {
    let template = template();
    let acl = &template["Resources"]["ApiWebAcl"]["Properties"];
    let rules = acl["Rules"].as_sequence().expect("Rules");
    // Beside AWS's managed groups (template_posture.rs): two rules of our own, this one and
    // image files per IP (the next test).
    let ours: Vec<&str> = rules
        .iter()
        .filter(|r| r["Statement"].get("ManagedRuleGroupStatement").is_none())
        .filter_map(|r| r["Name"].as_str())
        .collect();
    assert_eq!(ours, ["unsigned-api-requests-per-ip", "image-files-per-ip"]);
    let rule = rules
        .iter()
        .find(|r| r["Name"].as_str() == Some("unsigned-api-requests-per-ip"))
        .expect("the unsigned rule");
    // WAF refuses a web ACL or a rule without it.
    for visibility in [&acl["VisibilityConfig"], &rule["VisibilityConfig"]] {
        assert_eq!(visibility["CloudWatchMetricsEnabled"].as_bool(), Some(true));
        assert_eq!(visibility["SampledRequestsEnabled"].as_bool(), Some(true));
        assert!(visibility.get("MetricName").is_some());
    }

    // A rate-based rule per source IP, with the parameter as its limit per 5 minutes.
    let rate = &rule["Statement"]["RateBasedStatement"];
    assert_eq!(rate["AggregateKeyType"].as_str(), Some("IP"));
    assert_eq!(
        tagged(&rate["Limit"], "Ref").and_then(Value::as_str),
        Some("WafRateLimitPerIp")
    );
    assert_eq!(rate["EvaluationWindowSec"].as_u64(), Some(300));

    // Over the limit: 429 in our JSON error shape, with Retry-After.
    let response = &rule["Action"]["Block"]["CustomResponse"];
    assert_eq!(response["ResponseCode"].as_u64(), Some(429));
    let headers = response["ResponseHeaders"]
        .as_sequence()
        .expect("ResponseHeaders");
    assert!(headers.iter().any(|h| {
        h["Name"]
            .as_str()
            .is_some_and(|n| n.eq_ignore_ascii_case("retry-after"))
            && h["Value"]
                .as_str()
                .is_some_and(|v| v.parse::<u32>().is_ok())
    }));
    let key = str_of(&response["CustomResponseBodyKey"], "CustomResponseBodyKey");
    let body = &acl["CustomResponseBodies"][key];
    assert_eq!(body["ContentType"].as_str(), Some("APPLICATION_JSON"));
    let json: serde_json::Value =
        serde_json::from_str(str_of(&body["Content"], "Content")).expect("a JSON body");
    assert!(json["error"].is_string(), "{json}");
    assert_eq!(json.as_object().map(|o| o.len()), Some(1), "{json}");

    // Counted: API requests that carry no OAuth signature. Never a signed request (a
    // partner's sync job from one address may send thousands a second), never an image file.
    let scope = &rate["ScopeDownStatement"];
    let counted = |path, query, authorization| {
        waf_matches(
            scope,
            &ViewerRequest {
                path,
                query,
                authorization,
            },
        )
    };
    let signed = sitehost::auth::oauth1::authorization_header(
        "GET",
        "https://d111111abcdef8.cloudfront.net/api/v2/businesses/",
        &[],
        "key",
        "secret",
        1_714_564_800,
        "nonce",
    );
    assert!(!counted("/api/v2/businesses/", "", Some(signed.as_str())));
    assert!(!counted(
        "/api/v2/businesses/",
        "limit=10",
        Some("oauth oauth_consumer_key=\"key\"")
    ));
    assert!(!counted(
        "/api/v2/businesses/",
        "limit=10&oauth_consumer_key=key&oauth_signature=abc%3D",
        None
    ));
    assert!(!counted("/api/v2/images/", "oauth%5Fsignature=abc", None));
    assert!(!counted("/img/upload/1/abc-150.jpg", "", None));
    assert!(!counted("/errors/unavailable.json", "", None));
    assert!(counted("/api/v2/businesses/", "", None));
    assert!(counted("/api/v2/businesses/", "limit=10", None));
    assert!(counted("/api/v2/nothing", "", Some("Bearer abc")));
    assert!(counted("/api/v1/businesses/", "", Some("")));
}

#[test]
fn the_waf_rate_limits_image_files_per_ip() {
    let template = template();
    let limit = &template["Parameters"]["WafImageRateLimitPerIp"];
    assert_eq!(limit["Type"].as_str(), Some("Number"));
    assert!(limit["MinValue"].as_u64() >= Some(10), "WAF's lowest limit");
    assert!(limit["Default"].as_u64() >= limit["MinValue"].as_u64());
    let acl = &template["Resources"]["ApiWebAcl"]["Properties"];
    let rule = acl["Rules"]
        .as_sequence()
        .expect("Rules")
        .iter()
        .find(|r| r["Name"].as_str() == Some("image-files-per-ip"))
        .expect("an image files rule");
    let rate = &rule["Statement"]["RateBasedStatement"];
    assert_eq!(rate["AggregateKeyType"].as_str(), Some("IP"));
    assert_eq!(
        tagged(&rate["Limit"], "Ref").and_then(Value::as_str),
        Some("WafImageRateLimitPerIp")
    );
    assert_eq!(rate["EvaluationWindowSec"].as_u64(), Some(300));
    let response = &rule["Action"]["Block"]["CustomResponse"];
    assert_eq!(response["ResponseCode"].as_u64(), Some(429));
    let key = str_of(&response["CustomResponseBodyKey"], "CustomResponseBodyKey");
    let body = &acl["CustomResponseBodies"][key];
    let json: serde_json::Value =
        serde_json::from_str(str_of(&body["Content"], "Content")).expect("a JSON body");
    assert!(json["error"].is_string(), "{json}");
    let visibility = &rule["VisibilityConfig"];
    assert_eq!(visibility["CloudWatchMetricsEnabled"].as_bool(), Some(true));
    assert!(visibility.get("MetricName").is_some());
    // Counted: every request under /img/upload/, signed or not, junk or not; nothing else.
    let scope = &rate["ScopeDownStatement"];
    let counted = |path| {
        waf_matches(
            scope,
            &ViewerRequest {
                path,
                query: "",
                authorization: None,
            },
        )
    };
    assert!(counted("/img/upload/a--1.small.jpg"));
    assert!(counted("/img/upload//////junk"));
    assert!(!counted("/api/v2/businesses/"));
    assert!(!counted("/errors/unavailable.json"));
}

/// Image files (/img/upload/*): the viewer-request function picks the WebP sibling of a
/// small or thumbnail variant when Accept names image/webp, and normalises Accept
/// (`image/webp` or none), which the behaviour's cache policy keys on; responses say
/// `Vary: Accept` and stay nosniff.
#[test]
fn image_variants_follow_accept_through_a_normalised_cache_key() {
    let template = template();
    let resources = &template["Resources"];
    let config = &resources["Distribution"]["Properties"]["DistributionConfig"];
    let behaviours = config["CacheBehaviors"]
        .as_sequence()
        .expect("CacheBehaviors");
    let image_behaviours: Vec<&Value> = behaviours
        .iter()
        .filter(|b| {
            b["PathPattern"]
                .as_str()
                .is_some_and(|p| p.starts_with("/img/upload/"))
        })
        .collect();
    // One behaviour per variant size goes to the origin group, then the rest of the
    // directory to the bucket alone; all alike otherwise.
    let patterns: Vec<&str> = image_behaviours
        .iter()
        .filter_map(|b| b["PathPattern"].as_str())
        .collect();
    let mut expected: Vec<String> = sitehost::domain::image_record::VARIANTS
        .iter()
        .map(|(size, _)| format!("/img/upload/*.{size}.???"))
        .collect();
    expected.push("/img/upload/*".into());
    assert_eq!(patterns, expected);
    for behaviour in &image_behaviours {
        for key in [
            "ViewerProtocolPolicy",
            "AllowedMethods",
            "CachePolicyId",
            "ResponseHeadersPolicyId",
            "FunctionAssociations",
        ] {
            assert_eq!(behaviour[key], image_behaviours[0][key], "{key}");
        }
    }
    let (last, variant_behaviours) = image_behaviours.split_last().expect("behaviours");
    assert_eq!(last["TargetOriginId"].as_str(), Some("files"));
    let files = variant_behaviours[0];
    assert!(variant_behaviours
        .iter()
        .all(|b| b["TargetOriginId"] == files["TargetOriginId"]));
    // The bucket first; where it has no file, the sibling maker.
    let group_id = files["TargetOriginId"].as_str().expect("TargetOriginId");
    let group = config["OriginGroups"]["Items"]
        .as_sequence()
        .expect("OriginGroups.Items")
        .iter()
        .find(|g| g["Id"].as_str() == Some(group_id))
        .expect("/img/upload/* goes to an origin group");
    let members: Vec<&str> = group["Members"]["Items"]
        .as_sequence()
        .expect("Members.Items")
        .iter()
        .filter_map(|m| m["OriginId"].as_str())
        .collect();
    assert_eq!(members, ["files", "image-sibling"]);
    assert_eq!(group["Members"]["Quantity"].as_u64(), Some(2));
    let failover: Vec<u64> = group["FailoverCriteria"]["StatusCodes"]["Items"]
        .as_sequence()
        .expect("StatusCodes.Items")
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    // A missing object is 403 from S3 to a reader without ListBucket, 404 with it.
    assert_eq!(failover, [403, 404]);
    assert_eq!(
        group["FailoverCriteria"]["StatusCodes"]["Quantity"].as_u64(),
        Some(2)
    );
    let origins = config["Origins"].as_sequence().expect("Origins");
    let origin = |id: &str| {
        origins
            .iter()
            .find(|o| o["Id"].as_str() == Some(id))
            .unwrap_or_else(|| panic!("no origin {id}"))
    };
    let maker = origin("image-sibling");
    // The function URL's host, signed for by an origin access control of type lambda...
    let host = tagged(&maker["DomainName"], "Select")
        .and_then(Value::as_sequence)
        .expect("DomainName: !Select [2, !Split [/, <url>]]");
    assert_eq!(host[0].as_u64(), Some(2));
    let split = tagged(&host[1], "Split")
        .and_then(Value::as_sequence)
        .expect("!Split");
    assert_eq!(
        tagged(&split[1], "GetAtt").and_then(Value::as_str),
        Some("ImageSiblingFunctionUrl.FunctionUrl")
    );
    assert_eq!(
        maker["CustomOriginConfig"]["OriginProtocolPolicy"].as_str(),
        Some("https-only")
    );
    let control_id = tagged(&maker["OriginAccessControlId"], "GetAtt")
        .and_then(Value::as_str)
        .and_then(|a| a.strip_suffix(".Id"))
        .expect("OriginAccessControlId: !GetAtt <control>.Id");
    let control = &resources[control_id]["Properties"]["OriginAccessControlConfig"];
    assert_eq!(
        control["OriginAccessControlOriginType"].as_str(),
        Some("lambda")
    );
    assert_eq!(control["SigningBehavior"].as_str(), Some("always"));
    // ...of a function whose URL takes only signed requests...
    let function = &resources["ImageSiblingFunction"]["Properties"];
    assert_eq!(
        function["CodeUri"].as_str(),
        Some("functions/image-sibling")
    );
    assert_eq!(
        function["FunctionUrlConfig"]["AuthType"].as_str(),
        Some("AWS_IAM")
    );
    // ...and that only this distribution may call, with both actions a URL needs.
    let mut granted = BTreeSet::new();
    for (_, resource) in resources.as_mapping().expect("Resources") {
        if resource["Type"].as_str() != Some("AWS::Lambda::Permission") {
            continue;
        }
        let properties = &resource["Properties"];
        if tagged(&properties["FunctionName"], "Ref").and_then(Value::as_str)
            != Some("ImageSiblingFunction")
        {
            continue;
        }
        assert_eq!(
            properties["Principal"].as_str(),
            Some("cloudfront.amazonaws.com")
        );
        assert_eq!(
            tagged(&properties["SourceArn"], "Sub").and_then(Value::as_str),
            Some(
                "arn:${AWS::Partition}:cloudfront::${AWS::AccountId}:distribution/${Distribution}"
            )
        );
        granted.insert(str_of(&properties["Action"], "Action").to_string());
    }
    assert_eq!(
        granted,
        BTreeSet::from([
            "lambda:InvokeFunction".to_string(),
            "lambda:InvokeFunctionUrl".to_string()
        ])
    );
    assert_eq!(
        files["ViewerProtocolPolicy"].as_str(),
        Some("redirect-to-https")
    );

    let policy = referenced(
        resources,
        &files["CachePolicyId"],
        "AWS::CloudFront::CachePolicy",
    );
    let key =
        &policy["Properties"]["CachePolicyConfig"]["ParametersInCacheKeyAndForwardedToOrigin"];
    assert_eq!(
        key["HeadersConfig"]["HeaderBehavior"].as_str(),
        Some("whitelist")
    );
    let headers: Vec<&str> = key["HeadersConfig"]["Headers"]
        .as_sequence()
        .expect("Headers")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(headers, ["Accept"], "only the normalised Accept");
    assert_eq!(
        key["CookiesConfig"]["CookieBehavior"].as_str(),
        Some("none")
    );
    assert_eq!(
        key["QueryStringsConfig"]["QueryStringBehavior"].as_str(),
        Some("none")
    );
    assert_eq!(
        policy["Properties"]["CachePolicyConfig"]["MaxTTL"].as_u64(),
        Some(31_536_000),
        "files are immutable: cached up to a year"
    );

    let headers_id = tagged(&files["ResponseHeadersPolicyId"], "Ref")
        .and_then(Value::as_str)
        .expect("ResponseHeadersPolicyId: !Ref");
    let custom = resources[headers_id]["Properties"]["ResponseHeadersPolicyConfig"]
        ["CustomHeadersConfig"]["Items"]
        .as_sequence()
        .expect("custom headers");
    assert!(
        custom.iter().any(|h| h["Header"].as_str() == Some("Vary")
            && h["Value"].as_str() == Some("Accept")
            && h["Override"].as_bool() == Some(true)),
        "Vary: Accept on image files"
    );

    let association = files["FunctionAssociations"]
        .as_sequence()
        .expect("FunctionAssociations")
        .iter()
        .find(|a| a["EventType"].as_str() == Some("viewer-request"))
        .expect("a viewer-request function on /img/upload/*");
    let function_id = tagged(&association["FunctionARN"], "GetAtt")
        .and_then(Value::as_str)
        .and_then(|a| a.strip_suffix(".FunctionMetadata.FunctionARN"))
        .expect("!GetAtt <Function>.FunctionMetadata.FunctionARN");
    let code = resources[function_id]["Properties"]["FunctionCode"]
        .as_str()
        .expect("FunctionCode: a plain string");
    for (size, _) in sitehost::domain::image_record::VARIANTS {
        assert!(code.contains(size), "{size} is not in the function");
    }
    check_image_files_function_with_node(code);
}

/// Runs the image files function with node (skipped without node): which URI and Accept
/// each request leaves with.
fn check_image_files_function_with_node(code: &str) {
    const CHROME: &str = "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8";
    const WEBP_ONLY: &str = "image/webp,*/*";
    let cases: &[(&str, Option<&str>, &str, Option<&str>)] = &[
        // uri, Accept sent; uri and Accept after the function
        (
            "/img/upload/shop-k3v9x0q2m1za--26.small.jpg",
            Some(CHROME),
            "/img/upload/shop-k3v9x0q2m1za--26.small.jpg.avif",
            Some("image/avif"),
        ),
        (
            "/img/upload/shop-k3v9x0q2m1za--26.small.jpg",
            Some(WEBP_ONLY),
            "/img/upload/shop-k3v9x0q2m1za--26.small.jpg.webp",
            Some("image/webp"),
        ),
        (
            "/img/upload/a_b-k3v9x0q2m1za--20.thumbnail.png",
            Some("image/webp;q=0.9, image/png, image/avif;q=0.8"),
            "/img/upload/a_b-k3v9x0q2m1za--20.thumbnail.png.webp",
            Some("image/webp"),
        ),
        (
            "/img/upload/x-k3v9x0q2m1za--26.small.gif",
            Some("IMAGE/WEBP"),
            "/img/upload/x-k3v9x0q2m1za--26.small.gif.webp",
            Some("image/webp"),
        ),
        (
            "/img/upload/x-k3v9x0q2m1za--26.small.gif",
            Some("IMAGE/AVIF, image/webp"),
            "/img/upload/x-k3v9x0q2m1za--26.small.gif.avif",
            Some("image/avif"),
        ),
        // Neither accepted: the variant, Accept dropped from the cache key.
        (
            "/img/upload/shop-k3v9x0q2m1za--26.small.jpg",
            Some("image/png,image/*;q=0.8,*/*;q=0.5"),
            "/img/upload/shop-k3v9x0q2m1za--26.small.jpg",
            None,
        ),
        (
            "/img/upload/shop-k3v9x0q2m1za--26.small.jpg",
            Some("image/webp;q=0, image/avif, */*"),
            "/img/upload/shop-k3v9x0q2m1za--26.small.jpg",
            None,
        ),
        (
            "/img/upload/shop-k3v9x0q2m1za--26.small.jpg",
            None,
            "/img/upload/shop-k3v9x0q2m1za--26.small.jpg",
            None,
        ),
        // Every size, and every image however old (its sibling is made on request).
        (
            "/img/upload/shop-k3v9x0q2m1za--1.big.jpg",
            Some(CHROME),
            "/img/upload/shop-k3v9x0q2m1za--1.big.jpg.avif",
            Some("image/avif"),
        ),
        (
            "/img/upload/shop-k3v9x0q2m1za--26.large.png",
            Some(CHROME),
            "/img/upload/shop-k3v9x0q2m1za--26.large.png.avif",
            Some("image/avif"),
        ),
        (
            "/img/upload/shop-k3v9x0q2m1za--26.medium.jpg",
            Some(WEBP_ONLY),
            "/img/upload/shop-k3v9x0q2m1za--26.medium.jpg.webp",
            Some("image/webp"),
        ),
        (
            "/img/upload/shop-k3v9x0q2m1za.medium.jpg",
            Some(CHROME),
            "/img/upload/shop-k3v9x0q2m1za.medium.jpg.avif",
            Some("image/avif"),
        ),
        // No sibling: originals, WebP variants, siblings asked for by name (paths outside
        // the stored-name grammar are refused: junk_never_reaches_the_sibling_function).
        (
            "/img/upload/shop-k3v9x0q2m1za--26.medium.jpg.webp",
            Some(CHROME),
            "/img/upload/shop-k3v9x0q2m1za--26.medium.jpg.webp",
            None,
        ),
        (
            "/img/upload/shop-k3v9x0q2m1za--26.medium.jpg.avif",
            Some(CHROME),
            "/img/upload/shop-k3v9x0q2m1za--26.medium.jpg.avif",
            None,
        ),
        (
            "/img/upload/shop-k3v9x0q2m1za--26.jpg",
            Some(CHROME),
            "/img/upload/shop-k3v9x0q2m1za--26.jpg",
            None,
        ),
        (
            "/img/upload/shop-k3v9x0q2m1za--26.medium.webp",
            Some(CHROME),
            "/img/upload/shop-k3v9x0q2m1za--26.medium.webp",
            None,
        ),
    ];
    // The shared Accept cases (api::siblings::chosen_sibling is held to the same list).
    type Case = (String, Option<String>, String, Option<String>);
    let owned = |s: &str| s.to_string();
    let mut cases: Vec<Case> = cases
        .iter()
        .map(|(uri, accept, to, normalised)| {
            (
                owned(uri),
                accept.map(owned),
                owned(to),
                normalised.map(owned),
            )
        })
        .collect();
    let variant = "/img/upload/shop-k3v9x0q2m1za--26.small.jpg";
    for case in image_file_cases()["accept"].as_array().expect("accept") {
        let accept = case[0].as_str().expect("accept");
        let (to, normalised) = match case[1].as_str() {
            Some(format) => (
                format!("{variant}.{format}"),
                Some(format!("image/{format}")),
            ),
            None => (owned(variant), None),
        };
        cases.push((owned(variant), Some(owned(accept)), to, normalised));
    }
    let requests: Vec<serde_json::Value> = cases
        .iter()
        .map(|(uri, accept, _, _)| {
            let mut headers = serde_json::json!({"host": {"value": "d111111abcdef8.cloudfront.net"}});
            if let Some(accept) = accept {
                headers["accept"] = serde_json::json!({"value": accept});
            }
            serde_json::json!({"method": "GET", "uri": uri, "querystring": {}, "headers": headers, "cookies": {}})
        })
        .collect();
    let script = format!(
        "{code}\nvar requests = {};\n\
         console.log(JSON.stringify(requests.map(function (r) {{ return handler({{request: r}}); }})));\n",
        serde_json::Value::Array(requests)
    );
    let Some(out) = crate::support::node::run_json(&script) else {
        return;
    };
    let out: Vec<serde_json::Value> = serde_json::from_value(out).expect("a list of results");
    assert_eq!(out.len(), cases.len());
    for ((uri, accept, want_uri, want_accept), got) in cases.iter().zip(&out) {
        assert_eq!(
            got["uri"].as_str(),
            Some(want_uri.as_str()),
            "{uri} {accept:?}"
        );
        assert_eq!(
            got["headers"]["accept"]["value"].as_str(),
            want_accept.as_deref(),
            "{uri} {accept:?}: the normalised Accept"
        );
        assert_eq!(
            got["headers"]["host"]["value"], "d111111abcdef8.cloudfront.net",
            "other headers pass"
        );
    }
}

/// `sitehost/tests/cases/image_files.json`: the Accept and path cases both sides' rules are
/// held to (the Rust side in `api::siblings`).
fn image_file_cases() -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cases/image_files.json");
    let text = std::fs::read_to_string(&path).expect("the shared case list");
    serde_json::from_str(&text).expect("json")
}

/// CloudFront's path pattern match: `*` any run of characters, `?` exactly one.
fn path_pattern_matches(pattern: &[u8], path: &[u8]) -> bool {
    match (pattern.split_first(), path.split_first()) {
        (None, _) => path.is_empty(),
        (Some((b'*', rest)), _) => {
            (0..=path.len()).any(|skip| path_pattern_matches(rest, &path[skip..]))
        }
        (Some((b'?', rest)), Some((_, tail))) => path_pattern_matches(rest, tail),
        (Some((want, rest)), Some((got, tail))) => want == got && path_pattern_matches(rest, tail),
        (Some(_), None) => false,
    }
}

/// Every path of the shared list and more junk, with and without WebP, as the distribution
/// takes them: ImageFilesFunction (run with node) answers 404 outside the stored-name
/// grammar, and the first matching cache behaviour picks the origin. Only a variant's URI
/// reaches the origin group that fails over to image-sibling, as the variant or its sibling.
#[test]
fn junk_never_reaches_the_sibling_function() {
    let template = template();
    let resources = &template["Resources"];
    let config = &resources["Distribution"]["Properties"]["DistributionConfig"];
    let code = resources["ImageFilesFunction"]["Properties"]["FunctionCode"]
        .as_str()
        .expect("FunctionCode");
    let groups_with_maker: BTreeSet<&str> = config["OriginGroups"]["Items"]
        .as_sequence()
        .expect("OriginGroups")
        .iter()
        .filter(|g| {
            g["Members"]["Items"].as_sequence().is_some_and(|m| {
                m.iter()
                    .any(|m| m["OriginId"].as_str() == Some("image-sibling"))
            })
        })
        .filter_map(|g| g["Id"].as_str())
        .collect();
    let behaviours = config["CacheBehaviors"]
        .as_sequence()
        .expect("CacheBehaviors");
    let origin_of = |uri: &str| {
        behaviours
            .iter()
            .find(|b| {
                b["PathPattern"]
                    .as_str()
                    .is_some_and(|p| path_pattern_matches(p.as_bytes(), uri.as_bytes()))
            })
            .unwrap_or(&config["DefaultCacheBehavior"])["TargetOriginId"]
            .as_str()
            .expect("TargetOriginId")
            .to_string()
    };
    assert!(groups_with_maker.iter().all(|g| *g != "image-sibling"));
    assert_ne!(origin_of("/img/upload/x.jpg"), "image-sibling");

    let set = "shop-k3v9x0q2m1za--26";
    let mut uris: Vec<(String, Option<String>)> = image_file_cases()["paths"]
        .as_array()
        .expect("paths")
        .iter()
        .map(|c| {
            (
                c[0].as_str().expect("path").to_string(),
                c[1].as_str().map(str::to_string),
            )
        })
        .collect();
    for junk in [
        format!("/img/upload/{set}.small.jpg.webp.webp"),
        format!("/img/upload/{set}.small.xyz"),
        format!("/img/upload/../../{set}.small.jpg"),
        format!("/img/upload/{}{set}.small.jpg", "/".repeat(4000)),
        format!("/img/upload/{set}.small.j%70g"),
        format!("/img/upload/{set}%2Esmall.jpg"),
        format!("/img/upload/{set}.small.jpg%00"),
        format!("/img/upload/{}.small.jpg", "x".repeat(500)),
        "/img/upload/x.small.JPG".to_string(),
    ] {
        uris.push((junk, None));
    }
    let requests: Vec<serde_json::Value> = uris
        .iter()
        .flat_map(|(uri, _)| {
            [Some("image/avif,image/webp"), Some("image/webp"), None].map(|accept| {
                let mut headers = serde_json::json!({"host": {"value": "d111111abcdef8.cloudfront.net"}});
                if let Some(accept) = accept {
                    headers["accept"] = serde_json::json!({"value": accept});
                }
                serde_json::json!({"method": "GET", "uri": uri, "querystring": {}, "headers": headers, "cookies": {}})
            })
        })
        .collect();
    let script = format!(
        "{code}\nvar requests = {};\n\
         console.log(JSON.stringify(requests.map(function (r) {{ return handler({{request: r}}); }})));\n",
        serde_json::Value::Array(requests)
    );
    let Some(out) = crate::support::node::run_json(&script) else {
        return;
    };
    let out = out.as_array().expect("results");
    assert_eq!(out.len(), uris.len() * 3);
    for ((uri, kind), answers) in uris.iter().zip(out.chunks(3)) {
        for got in answers {
            let refused = got["statusCode"].as_u64() == Some(404);
            assert_eq!(refused, kind.is_none(), "{uri:.80}: refused at the edge");
            let reaches = !refused && groups_with_maker.contains(origin_of(uri).as_str());
            let sent = got["uri"].as_str().unwrap_or_default();
            if reaches {
                assert_eq!(kind.as_deref(), Some("variant"), "{uri}");
                assert!(
                    sent == uri || *sent == format!("{uri}.webp") || *sent == format!("{uri}.avif"),
                    "{uri} -> {sent}"
                );
                let webp_variant = uri.ends_with(".webp");
                assert!(!webp_variant, "a WebP variant has no sibling: {uri}");
            }
            if kind.as_deref() == Some("variant") && !uri.ends_with(".webp") {
                assert!(reaches, "{uri}: a variant may have its sibling made");
            }
        }
    }
}
