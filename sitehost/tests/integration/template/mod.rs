//! `template.yaml` agrees with the code and holds the posture of a deployment. Each file is
//! one subject; this module holds what they share: the parsed template (as
//! `serde_yaml::Value`, which keeps CloudFormation tags such as `!Ref`, `!Sub`, `!GetAtt`
//! and `!If` as tagged values) and its functions.

mod alarms;
mod cloudfront;
mod dashboard;
mod environment;
mod function_resources;
mod iam;
mod image_files;
mod posture;
mod routes;
mod throttling;
mod waf;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde_yaml::Value;
use sitehost::api::Operation;

/// Functions that serve no API operation: image-sibling answers the frontend's image
/// origin group (a function URL), not the HTTP API.
const FRONTEND_FUNCTIONS: &[&str] = &["image-sibling"];

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn template() -> Value {
    let path = workspace_root().join("template.yaml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_yaml::from_str(&text).expect("template.yaml is not valid YAML")
}

/// The value under a CloudFormation tag such as `!Ref` (`tag` without the `!`).
fn tagged<'a>(value: &'a Value, tag: &str) -> Option<&'a Value> {
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

/// A statement's `Resource` as a list of values.
fn resources(statement: &Value) -> Vec<&Value> {
    match &statement["Resource"] {
        Value::Sequence(list) => list.iter().collect(),
        other => vec![other],
    }
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

/// `!Not [!Equals [!Ref <parameter>, <value>]]`: the parameter and the value.
fn not_equals(condition: &Value) -> (String, Value) {
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
