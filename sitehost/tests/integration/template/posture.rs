//! `template.yaml`'s going-live posture (docs/deploy.md, "Going live"):
//! - the records table has point-in-time recovery (docs/operations.md restores it);
//! - the files bucket is versioned; noncurrent versions expire after a parameter's days (at
//!   least the table's 35 days of point-in-time recovery) and expired delete markers go;
//! - a stack marked production is refused without a custom domain and certificate, without
//!   an alarm e-mail or topic, without a web ACL, outside us-east-1, with logs kept less
//!   than a year, and without a key administrator (template `Rules`);
//! - the records table is encrypted with the stack's own key, for its functions and an
//!   administrator only;
//! - both response header policies send Strict-Transport-Security;
//! - every log group is kept when the stack is deleted, its retention a parameter of 365
//!   days by default; CloudFront and the files bucket log to a private, TLS-only, expiring
//!   log bucket;
//! - the web ACL, when created, has AWS's IP reputation and known bad inputs groups and logs,
//!   without the OAuth signature;
//! - every checkov skip and Guard suppression gives its reason (scripts/check-posture runs
//!   the tools themselves).

use serde_yaml::Value;

use super::{not_equals, tagged, template};

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

fn refs(value: &Value) -> Option<&str> {
    tagged(value, "Ref").and_then(Value::as_str)
}

fn resources_of<'a>(template: &'a Value, kind: &str) -> Vec<(&'a str, &'a Value)> {
    template["Resources"]
        .as_mapping()
        .expect("Resources")
        .iter()
        .filter(|(_, r)| r["Type"].as_str() == Some(kind))
        .map(|(id, r)| (id.as_str().expect("logical id"), r))
        .collect()
}

fn lifecycle_rule<'a>(bucket: &'a Value, id: &str) -> &'a Value {
    bucket["Properties"]["LifecycleConfiguration"]["Rules"]
        .as_sequence()
        .expect("LifecycleConfiguration.Rules")
        .iter()
        .find(|r| r["Id"].as_str() == Some(id))
        .unwrap_or_else(|| panic!("lifecycle rule {id}"))
}

#[test]
fn deleted_files_stay_restorable_for_the_recovery_window() {
    let template = template();
    let bucket = &template["Resources"]["FilesBucket"];
    assert_eq!(
        bucket["Properties"]["VersioningConfiguration"]["Status"].as_str(),
        Some("Enabled")
    );
    let days = &template["Parameters"]["FileVersionRetentionDays"];
    assert_eq!(days["Type"].as_str(), Some("Number"));
    // The table's point-in-time recovery reaches 35 days back: a record restored from then
    // must still find its files.
    assert!(days["Default"].as_u64() >= Some(35), "{days:?}");
    assert_eq!(days["MinValue"].as_u64(), Some(35));
    let noncurrent = lifecycle_rule(bucket, "expire-noncurrent-versions");
    assert_eq!(noncurrent["Status"].as_str(), Some("Enabled"));
    assert_eq!(
        refs(&noncurrent["NoncurrentVersionExpiration"]["NoncurrentDays"]),
        Some("FileVersionRetentionDays")
    );
    let markers = lifecycle_rule(bucket, "remove-expired-delete-markers");
    assert_eq!(markers["Status"].as_str(), Some("Enabled"));
    assert_eq!(markers["ExpiredObjectDeleteMarker"].as_bool(), Some(true));
    // Writes and deletes are logged (S3 server access logs to the log bucket).
    let logging = &bucket["Properties"]["LoggingConfiguration"];
    assert_eq!(refs(&logging["DestinationBucketName"]), Some("LogBucket"));
}

/// Staged uploads' files: a bucket of their own, unversioned (a used or abandoned file
/// leaves nothing behind), expired a day after it was posted, private, TLS only, logged,
/// and posted to from any origin; nothing serves it (the distribution's origins are the
/// files bucket and the API).
#[test]
fn staged_files_expire_after_a_day_and_are_never_served() {
    let template = template();
    let bucket = &template["Resources"]["StagingBucket"];
    let properties = &bucket["Properties"];
    assert!(properties.get("VersioningConfiguration").is_none());
    let expire = lifecycle_rule(bucket, "expire-staged-files");
    assert_eq!(expire["Status"].as_str(), Some("Enabled"));
    assert_eq!(expire["Prefix"].as_str(), Some("staging/"));
    assert_eq!(expire["ExpirationInDays"].as_u64(), Some(1));
    let block = &properties["PublicAccessBlockConfiguration"];
    for setting in [
        "BlockPublicAcls",
        "BlockPublicPolicy",
        "IgnorePublicAcls",
        "RestrictPublicBuckets",
    ] {
        assert_eq!(block[setting].as_bool(), Some(true), "{setting}");
    }
    assert_eq!(
        refs(&properties["LoggingConfiguration"]["DestinationBucketName"]),
        Some("LogBucket")
    );
    let cors = properties["CorsConfiguration"]["CorsRules"]
        .as_sequence()
        .expect("CorsRules");
    assert_eq!(cors.len(), 1);
    assert_eq!(
        cors[0]["AllowedMethods"].as_sequence().map(Vec::len),
        Some(1)
    );
    assert_eq!(cors[0]["AllowedMethods"][0].as_str(), Some("POST"));
    let policy = &template["Resources"]["StagingBucketPolicy"]["Properties"];
    assert_eq!(refs(&policy["Bucket"]), Some("StagingBucket"));
    let statements = policy["PolicyDocument"]["Statement"]
        .as_sequence()
        .expect("statements");
    assert!(statements
        .iter()
        .all(|statement| statement["Effect"].as_str() == Some("Deny")));
    let distribution =
        serde_yaml::to_string(&template["Resources"]["Distribution"]).expect("distribution");
    assert!(!distribution.contains("StagingBucket"));
}

/// The assertion of a production rule: its condition is `Production == "true"`.
fn production_assertion<'a>(template: &'a Value, rule: &str) -> &'a Value {
    let rule = &template["Rules"][rule];
    let equals = tagged(&rule["RuleCondition"], "Equals")
        .and_then(Value::as_sequence)
        .expect("RuleCondition: !Equals [!Ref Production, \"true\"]");
    assert_eq!(refs(&equals[0]), Some("Production"));
    assert_eq!(equals[1].as_str(), Some("true"));
    let assertions = rule["Assertions"].as_sequence().expect("Assertions");
    assert_eq!(assertions.len(), 1);
    assert!(assertions[0]["AssertDescription"].is_string());
    &assertions[0]["Assert"]
}

/// The parameters a list of `!Not [!Equals [!Ref P, ""]]` requires to be given.
fn given(conditions: &Value) -> Vec<String> {
    conditions
        .as_sequence()
        .expect("a list of conditions")
        .iter()
        .map(|c| {
            let (name, value) = not_equals(c);
            assert_eq!(value.as_str(), Some(""), "{name}");
            name
        })
        .collect()
}

#[test]
fn a_production_stack_needs_a_custom_domain_and_alarms_that_reach_someone() {
    let template = template();
    let production = &template["Parameters"]["Production"];
    assert_eq!(production["Default"].as_str(), Some("false"));
    let allowed: Vec<&str> = production["AllowedValues"]
        .as_sequence()
        .expect("AllowedValues")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(allowed, ["true", "false"]);

    // Both the domain and its certificate: only then is the viewer policy TLSv1.2_2021
    // (cloudfront.rs holds the distribution's !If on HasCustomDomain).
    let domain = production_assertion(&template, "ProductionNeedsCustomDomain");
    let all = tagged(domain, "And").expect("!And [...]");
    assert_eq!(given(all), ["DomainName", "CertificateArn"]);
    let has_custom_domain = tagged(&template["Conditions"]["HasCustomDomain"], "And")
        .expect("HasCustomDomain: !And [...]");
    assert_eq!(given(has_custom_domain), ["DomainName", "CertificateArn"]);

    // An e-mail (a topic of the stack) or a topic of one's own.
    let alarms = production_assertion(&template, "ProductionNeedsAlarmDestination");
    let any = tagged(alarms, "Or").expect("!Or [...]");
    assert_eq!(given(any), ["AlarmEmail", "AlarmTopicArn"]);
    let (name, _) = not_equals(&template["Conditions"]["HasAlarmEmail"]);
    assert_eq!(name, "AlarmEmail");
    let topic = &template["Resources"]["AlarmTopic"];
    assert_eq!(topic["Type"].as_str(), Some("AWS::SNS::Topic"));
    assert_eq!(topic["Condition"].as_str(), Some("HasAlarmEmail"));
    let subscription = &topic["Properties"]["Subscription"][0];
    assert_eq!(subscription["Protocol"].as_str(), Some("email"));
    assert_eq!(refs(&subscription["Endpoint"]), Some("AlarmEmail"));
}

#[test]
fn both_response_header_policies_send_hsts() {
    let template = template();
    let policies = resources_of(&template, "AWS::CloudFront::ResponseHeadersPolicy");
    assert_eq!(policies.len(), 2, "{policies:?}");
    for (id, policy) in policies {
        let hsts = &policy["Properties"]["ResponseHeadersPolicyConfig"]["SecurityHeadersConfig"]
            ["StrictTransportSecurity"];
        assert_eq!(hsts["Override"].as_bool(), Some(true), "{id}");
        assert!(
            hsts["AccessControlMaxAgeSec"].as_u64() >= Some(31_536_000),
            "{id}: a year at least"
        );
    }
}

#[test]
fn logs_are_kept_a_year_and_outlive_the_stack() {
    let template = template();
    let days = &template["Parameters"]["LogRetentionDays"];
    assert_eq!(days["Default"].as_u64(), Some(365));
    let groups = resources_of(&template, "AWS::Logs::LogGroup");
    // The API's access log, each function's request log and the WAF's.
    let functions = resources_of(&template, "AWS::Serverless::Function").len();
    assert_eq!(groups.len(), functions + 2, "{groups:?}");
    for (id, group) in groups {
        assert_eq!(group["DeletionPolicy"].as_str(), Some("Retain"), "{id}");
        assert_eq!(
            group["UpdateReplacePolicy"].as_str(),
            Some("Retain"),
            "{id}"
        );
        assert_eq!(
            refs(&group["Properties"]["RetentionInDays"]),
            Some("LogRetentionDays"),
            "{id}"
        );
    }

    // CloudFront's standard logs go to the log bucket: private, expiring, TLS only.
    let resources = &template["Resources"];
    let logging = &resources["Distribution"]["Properties"]["DistributionConfig"]["Logging"];
    assert_eq!(
        tagged(&logging["Bucket"], "GetAtt").and_then(Value::as_str),
        Some("LogBucket.DomainName")
    );
    let bucket = &resources["LogBucket"];
    assert_eq!(bucket["DeletionPolicy"].as_str(), Some("Retain"));
    let block = &bucket["Properties"]["PublicAccessBlockConfiguration"];
    for setting in [
        "BlockPublicAcls",
        "BlockPublicPolicy",
        "IgnorePublicAcls",
        "RestrictPublicBuckets",
    ] {
        assert_eq!(block[setting].as_bool(), Some(true), "{setting}");
    }
    let expiry = lifecycle_rule(bucket, "expire-logs");
    assert_eq!(
        refs(&expiry["ExpirationInDays"]),
        Some("AccessLogExpirationDays")
    );
    let statements = resources["LogBucketPolicy"]["Properties"]["PolicyDocument"]["Statement"]
        .as_sequence()
        .expect("Statement");
    let tls = statements
        .iter()
        .find(|s| s["Sid"].as_str() == Some("TlsOnly"))
        .expect("TlsOnly");
    assert_eq!(tls["Effect"].as_str(), Some("Deny"));
    assert_eq!(
        tls["Condition"]["Bool"]["aws:SecureTransport"].as_str(),
        Some("false")
    );
}

#[test]
fn the_web_acl_has_aws_managed_groups_and_logs() {
    let template = template();
    let resources = &template["Resources"];
    let rules = resources["ApiWebAcl"]["Properties"]["Rules"]
        .as_sequence()
        .expect("Rules");
    let managed: Vec<&str> = rules
        .iter()
        .filter_map(|r| {
            let group = &r["Statement"]["ManagedRuleGroupStatement"];
            // A group's own actions apply (blocks block).
            assert!(
                group.is_null() || r["OverrideAction"].get("None").is_some(),
                "{r:?}"
            );
            assert!(group.is_null() || group["VendorName"].as_str() == Some("AWS"));
            group["Name"].as_str()
        })
        .collect();
    assert_eq!(
        managed,
        [
            "AWSManagedRulesAmazonIpReputationList",
            "AWSManagedRulesKnownBadInputsRuleSet"
        ]
    );
    let mut priorities: Vec<u64> = rules
        .iter()
        .filter_map(|r| r["Priority"].as_u64())
        .collect();
    priorities.dedup();
    assert_eq!(priorities.len(), rules.len(), "distinct priorities");

    let logging = &resources["WafLogging"];
    assert_eq!(
        logging["Type"].as_str(),
        Some("AWS::WAFv2::LoggingConfiguration")
    );
    assert_eq!(logging["Condition"].as_str(), Some("CreateWebAcl"));
    assert_eq!(
        tagged(&logging["Properties"]["ResourceArn"], "GetAtt").and_then(Value::as_str),
        Some("ApiWebAcl.Arn")
    );
    let group = &resources["WafLogGroup"];
    assert_eq!(group["Condition"].as_str(), Some("CreateWebAcl"));
    // WAF only logs to groups so named.
    let name = tagged(&group["Properties"]["LogGroupName"], "Sub")
        .and_then(Value::as_str)
        .expect("LogGroupName: !Sub");
    assert!(name.starts_with("aws-waf-logs-"), "{name}");
    let redacted = format!("{:?}", logging["Properties"]["RedactedFields"]);
    assert!(redacted.contains("authorization"), "{redacted}");
    assert!(redacted.contains("QueryString"), "{redacted}");
}

/// scripts/check-posture fails on a skip without its comment too; this keeps the template's
/// side of it readable without the tools. The suppressions a SAM resource gives what SAM
/// generates from it (`Metadata.generated`) are held to the same.
#[test]
fn every_suppression_gives_its_reason() {
    let template = template();
    let mut generated = 0;
    for (id, resource) in template["Resources"].as_mapping().expect("Resources") {
        let meta = &resource["Metadata"];
        if meta.get("generated").is_some() {
            generated += 1;
        }
        for meta in [meta, &meta["generated"]] {
            assert_suppressions_have_reasons(id, meta);
        }
    }
    assert!(
        generated > 0,
        "the API functions' permissions are suppressed in `generated`"
    );
}

fn assert_suppressions_have_reasons(id: &Value, meta: &Value) {
    for skip in meta["checkov"]["skip"].as_sequence().into_iter().flatten() {
        let comment = skip["comment"].as_str().unwrap_or_default();
        assert!(comment.len() > 20, "{id:?}: checkov skip {skip:?}");
    }
    let guard = &meta["guard"];
    for rule in guard["SuppressedRules"].as_sequence().into_iter().flatten() {
        let rule = rule.as_str().expect("a rule name");
        let reason = guard["Reasons"][rule].as_str().unwrap_or_default();
        assert!(reason.len() > 20, "{id:?}: guard {rule} without a reason");
    }
}

/// The HTTP API's own address is no output: partners and operators use the frontend host,
/// and the address only serves someone going around the edge (docs/deploy.md, "The origin").
#[test]
fn no_output_gives_the_api_s_own_address() {
    let template = template();
    let outputs = serde_yaml::to_string(&template["Outputs"]).expect("Outputs");
    assert!(!outputs.contains("execute-api"), "{outputs}");
    assert!(template["Outputs"].get("ApiUrl").is_none());
}

/// A production stack also needs a web ACL, us-east-1 (its edge pieces are this stack's),
/// logs kept a year, and a named administrator of the records table's key.
#[test]
fn a_production_stack_needs_a_web_acl_us_east_1_a_year_of_logs_and_a_key_admin() {
    let template = template();
    let waf = production_assertion(&template, "ProductionNeedsWebAcl");
    let any = tagged(waf, "Or")
        .expect("!Or [...]")
        .as_sequence()
        .expect("list");
    let (rate, zero) = not_equals(&any[0]);
    assert_eq!(
        (rate.as_str(), zero.as_str()),
        ("WafRateLimitPerIp", Some("0"))
    );
    let (arn, empty) = not_equals(&any[1]);
    assert_eq!((arn.as_str(), empty.as_str()), ("WebAclArn", Some("")));

    let region = production_assertion(&template, "ProductionNeedsUsEast1");
    let equals = tagged(region, "Equals")
        .expect("!Equals")
        .as_sequence()
        .expect("list");
    assert_eq!(refs(&equals[0]), Some("AWS::Region"));
    assert_eq!(equals[1].as_str(), Some("us-east-1"));

    // Every retention value it allows is a year or more, and it allows every such value
    // of the parameter.
    let logs = production_assertion(&template, "ProductionKeepsLogsAYear");
    let contains = tagged(logs, "Contains")
        .expect("!Contains")
        .as_sequence()
        .expect("list");
    assert_eq!(refs(&contains[1]), Some("LogRetentionDays"));
    let allowed_in_production: Vec<u64> = contains[0]
        .as_sequence()
        .expect("the values")
        .iter()
        .map(|v| {
            v.as_str()
                .and_then(|v| v.parse().ok())
                .expect("a number as a string")
        })
        .collect();
    let year_or_more: Vec<u64> = template["Parameters"]["LogRetentionDays"]["AllowedValues"]
        .as_sequence()
        .expect("AllowedValues")
        .iter()
        .filter_map(Value::as_u64)
        .filter(|days| *days >= 365)
        .collect();
    assert_eq!(allowed_in_production, year_or_more);

    let admin = production_assertion(&template, "ProductionNeedsKeyAdmin");
    let (name, empty) = not_equals(admin);
    assert_eq!((name.as_str(), empty.as_str()), ("KeyAdminArn", Some("")));
}

/// The records table (partners' OAuth secrets among its items) is encrypted with the
/// stack's own key, whose policy names only the key administrator and the functions' roles
/// (by the IAM path every function's role has), and only through DynamoDB.
#[test]
fn the_records_table_has_its_own_key_for_the_functions_and_an_admin_only() {
    let template = template();
    let resources = &template["Resources"];
    let sse = &resources["RecordsTable"]["Properties"]["SSESpecification"];
    assert_eq!(sse["SSEEnabled"].as_bool(), Some(true));
    assert_eq!(sse["SSEType"].as_str(), Some("KMS"));
    assert_eq!(
        tagged(&sse["KMSMasterKeyId"], "GetAtt").and_then(Value::as_str),
        Some("RecordsTableKey.Arn")
    );
    let key = &resources["RecordsTableKey"];
    assert_eq!(key["Type"].as_str(), Some("AWS::KMS::Key"));
    assert_eq!(
        key["DeletionPolicy"].as_str(),
        Some("Retain"),
        "kept with the table"
    );
    assert_eq!(key["Properties"]["EnableKeyRotation"].as_bool(), Some(true));
    let role_path = tagged(&template["Globals"]["Function"]["RolePath"], "Sub")
        .and_then(Value::as_str)
        .expect("Globals.Function.RolePath: !Sub");
    assert_eq!(role_path, "/sitehost/${AWS::StackName}/");
    let via_dynamodb = "dynamodb.${AWS::Region}.amazonaws.com";
    let admin = "!If HasKeyAdmin";
    for statement in key["Properties"]["KeyPolicy"]["Statement"]
        .as_sequence()
        .expect("Statement")
    {
        let sid = statement["Sid"].as_str().expect("Sid");
        if sid == "GrantsForAwsResourcesOnly" {
            // The one Deny: grants (CreateGrant) only for an AWS resource, the table.
            assert_eq!(statement["Effect"].as_str(), Some("Deny"));
            assert_eq!(statement["Action"].as_str(), Some("kms:CreateGrant"));
            continue;
        }
        assert_eq!(statement["Effect"].as_str(), Some("Allow"), "{sid}");
        let principal = &statement["Principal"]["AWS"];
        let via = tagged(
            &statement["Condition"]["StringEquals"]["kms:ViaService"],
            "Sub",
        )
        .and_then(Value::as_str);
        if let Some(choice) = tagged(principal, "If").and_then(Value::as_sequence) {
            // KeyAdminArn, or the account's IAM policies when none is given (trial stacks).
            assert_eq!(choice[0].as_str(), Some("HasKeyAdmin"), "{sid}");
            assert_eq!(refs(&choice[1]), Some("KeyAdminArn"), "{sid}: {admin}");
            if sid != "Administer" {
                assert_eq!(via, Some(via_dynamodb), "{sid}: through DynamoDB only");
            }
        } else {
            // The account, narrowed to the functions' roles by their path.
            assert_eq!(sid, "FunctionsUseItThroughDynamoDB");
            assert_eq!(via, Some(via_dynamodb), "{sid}");
            let path = tagged(
                &statement["Condition"]["ArnLike"]["aws:PrincipalArn"],
                "Sub",
            )
            .and_then(Value::as_str)
            .expect("aws:PrincipalArn: !Sub");
            assert_eq!(
                path,
                format!("arn:${{AWS::Partition}}:iam::${{AWS::AccountId}}:role{role_path}*")
            );
            let actions = format!("{:?}", statement["Action"]);
            assert!(
                !actions.contains("CreateGrant") && !actions.contains("Put"),
                "{actions}"
            );
        }
    }
    // No suppression of the customer-key rules is left.
    let table = serde_yaml::to_string(&resources["RecordsTable"]).expect("table");
    assert!(
        !table.contains("CKV_AWS_119") && !table.contains("dynamodb_table_encrypted_kms_check")
    );
}
