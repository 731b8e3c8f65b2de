//! Every function's CodeUri is a workspace member whose package and binary carry its name,
//! image-upload and the sibling function have reserved concurrency, and every list function
//! is sized for a page of 1,000 objects.

use std::collections::BTreeSet;

use serde_yaml::Value;
use sitehost::api::Operation;

use super::{functions, operation_for_dir, tagged, template, workspace_root, FRONTEND_FUNCTIONS};

/// One function per operation, and the frontend's; every function directory is deployed.
#[test]
fn each_operation_has_one_function_and_every_directory_is_deployed() {
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

/// Every function's CodeUri is a workspace member whose package and binary carry its name.
#[test]
fn every_code_uri_is_a_workspace_member_named_after_its_function() {
    let template = template();
    let functions = functions(&template);
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
    }
}

/// A function's main.rs only starts its operation.
#[test]
fn every_functions_main_only_starts_its_operation() {
    let template = template();
    let functions = functions(&template);
    let root = workspace_root();
    for function in &functions {
        let dir = root.join("functions").join(&function.dir);
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

/// Every list answers up to 1,000 objects a page (batched reads and a few MB of JSON): each
/// list function has the memory (CPU) and time of the others, 1024 MB and 15 s
/// (docs/deploy.md, "Sizing").
#[test]
fn every_list_function_is_sized_for_a_page_of_1000_objects() {
    let template = template();
    let lists: Vec<_> = functions(&template)
        .into_iter()
        .filter(|f| f.dir.ends_with("-list"))
        .collect();
    let dirs: BTreeSet<&str> = lists.iter().map(|f| f.dir.as_str()).collect();
    assert_eq!(
        dirs,
        BTreeSet::from([
            "business-list",
            "image-list",
            "location-list",
            "post-list",
            "site-list"
        ])
    );
    for function in lists {
        let properties = function.properties();
        assert_eq!(
            properties["MemorySize"].as_u64(),
            Some(1024),
            "{}",
            function.logical_id
        );
        assert_eq!(
            properties["Timeout"].as_u64(),
            Some(15),
            "{}",
            function.logical_id
        );
    }
}
