//! Each function's IAM policy allows exactly the DynamoDB calls and partition keys it uses
//! (read-only functions write only nonces and budgets; only the CLI reads the key listing),
//! and S3 writes only under `img/upload/` (puts by image-upload, deletes by it and
//! image-delete); each writes only its own log group, and uses the table's key only through
//! DynamoDB.

use std::collections::BTreeSet;

use serde_yaml::Value;
use sitehost::api::Operation;

use super::{
    actions, functions, operation_for_dir, resources, str_of, tagged, template, Function,
    FRONTEND_FUNCTIONS,
};

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
    ("dynamodb:UpdateItem", "SITEHOST#*"),
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
    ("dynamodb:UpdateItem", "SITEHOST#*"),
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
    ("dynamodb:UpdateItem", "SITEHOST#*"),
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

/// Every `(action, partition key pattern)` a function's statements allow on the table.
fn table_grants(function: &Function) -> BTreeSet<(String, String)> {
    let mut grants = BTreeSet::new();
    for statement in function.statements() {
        let sid = statement["Sid"].as_str().unwrap_or("?");
        let what = format!("{}: {sid}", function.logical_id);
        if statement["Effect"].as_str() == Some("Deny") {
            // The log groups' (each_function_writes_only_its_own_log_group).
            continue;
        }
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

// Reads better whole: one loop over the functions, each held to its row of the table above.
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

/// SAM gives every function's role AWSLambdaBasicExecutionRole, which may write to every log
/// group of the account: each function's one Deny statement takes back all but its own (the
/// group its LoggingConfig names), so a function parsing hostile input cannot write lines
/// into another's request log, the audit trail and the alarms' metrics.
#[test]
fn each_function_writes_only_its_own_log_group() {
    let template = template();
    for function in functions(&template) {
        let id = &function.logical_id;
        let group = tagged(&function.properties()["LoggingConfig"]["LogGroup"], "Ref")
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("{id}: LoggingConfig.LogGroup: !Ref"));
        let denies: Vec<&Value> = function
            .statements()
            .into_iter()
            .filter(|s| s["Effect"].as_str() == Some("Deny"))
            .collect();
        assert_eq!(denies.len(), 1, "{id}: one Deny statement");
        let deny = denies[0];
        let actions: BTreeSet<String> = actions(deny).into_iter().collect();
        let expected: BTreeSet<String> = [
            "logs:CreateLogGroup",
            "logs:CreateLogStream",
            "logs:PutLogEvents",
        ]
        .map(String::from)
        .into();
        assert_eq!(actions, expected, "{id}");
        assert!(
            deny.get("Resource").is_none(),
            "{id}: NotResource, not Resource"
        );
        // Everything but its own group: its ARN with `:*` (its streams) and without.
        let not_resource = deny["NotResource"]
            .as_sequence()
            .expect("NotResource: [...]");
        assert_eq!(not_resource.len(), 2, "{id}");
        assert_eq!(
            tagged(&not_resource[0], "GetAtt").and_then(Value::as_str),
            Some(format!("{group}.Arn").as_str()),
            "{id}"
        );
        assert_eq!(
            tagged(&not_resource[1], "Sub").and_then(Value::as_str),
            Some(
                format!(
                    "arn:${{AWS::Partition}}:logs:${{AWS::Region}}:${{AWS::AccountId}}:log-group:${{{group}}}"
                )
                .as_str()
            ),
            "{id}"
        );
        // Any other statement naming logs would allow back what the Deny cannot take.
        for statement in function.statements() {
            if statement["Effect"].as_str() == Some("Allow") {
                assert!(
                    actions_of_service(statement, "logs:").is_empty(),
                    "{id}: an Allow of logs actions"
                );
            }
        }
    }
}

fn actions_of_service(statement: &Value, prefix: &str) -> Vec<String> {
    actions(statement)
        .into_iter()
        .filter(|a| a.starts_with(prefix))
        .collect()
}

/// The table's key (posture.rs holds its policy): a function that touches the table may
/// use it through DynamoDB only; one that does not, not at all.
#[test]
fn functions_use_the_table_key_through_dynamodb_only() {
    let template = template();
    for function in functions(&template) {
        let id = &function.logical_id;
        let kms: Vec<&Value> = function
            .statements()
            .into_iter()
            .filter(|s| !actions_of_service(s, "kms:").is_empty())
            .collect();
        if FRONTEND_FUNCTIONS.contains(&function.dir.as_str()) {
            assert!(kms.is_empty(), "{id}: no table, no key");
            continue;
        }
        assert_eq!(kms.len(), 1, "{id}: one statement for the table's key");
        let statement = kms[0];
        assert_eq!(statement["Effect"].as_str(), Some("Allow"));
        let mut actions = actions(statement);
        actions.sort();
        assert_eq!(
            actions,
            [
                "kms:Decrypt",
                "kms:DescribeKey",
                "kms:Encrypt",
                "kms:GenerateDataKey"
            ],
            "{id}"
        );
        assert_eq!(
            tagged(&statement["Resource"], "GetAtt").and_then(Value::as_str),
            Some("RecordsTableKey.Arn"),
            "{id}"
        );
        assert_eq!(
            tagged(
                &statement["Condition"]["StringEquals"]["kms:ViaService"],
                "Sub"
            )
            .and_then(Value::as_str),
            Some("dynamodb.${AWS::Region}.amazonaws.com"),
            "{id}"
        );
    }
}
