//! The optional per-IP WAF rate limit exists only when asked for in us-east-1, is attached
//! to the distribution only then (or an existing ACL given by ARN), and counts unsigned
//! `/api/` requests per source IP only.

use serde_yaml::Value;

use super::{not_equals, str_of, tagged, template};

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

// Reads better whole: one condition followed from the parameters to the resources and Rules.
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

/// The web ACL's rule of unsigned API requests per source IP.
fn unsigned_rule(acl: &Value) -> &Value {
    acl["Rules"]
        .as_sequence()
        .expect("Rules")
        .iter()
        .find(|r| r["Name"].as_str() == Some("unsigned-api-requests-per-ip"))
        .expect("the unsigned rule")
}

#[test]
fn our_two_rules_sit_beside_the_managed_groups_with_their_metrics() {
    let template = template();
    let acl = &template["Resources"]["ApiWebAcl"]["Properties"];
    let rules = acl["Rules"].as_sequence().expect("Rules");
    // Beside AWS's managed groups (posture.rs): two rules of our own, this one and
    // image files per IP (`the_waf_rate_limits_image_files_per_ip`).
    let ours: Vec<&str> = rules
        .iter()
        .filter(|r| r["Statement"].get("ManagedRuleGroupStatement").is_none())
        .filter_map(|r| r["Name"].as_str())
        .collect();
    assert_eq!(ours, ["unsigned-api-requests-per-ip", "image-files-per-ip"]);
    let rule = unsigned_rule(acl);
    // WAF refuses a web ACL or a rule without it.
    for visibility in [&acl["VisibilityConfig"], &rule["VisibilityConfig"]] {
        assert_eq!(visibility["CloudWatchMetricsEnabled"].as_bool(), Some(true));
        assert_eq!(visibility["SampledRequestsEnabled"].as_bool(), Some(true));
        assert!(visibility.get("MetricName").is_some());
    }
}

#[test]
fn the_unsigned_rule_limits_each_ip_by_the_parameter_per_5_minutes() {
    let template = template();
    let acl = &template["Resources"]["ApiWebAcl"]["Properties"];
    let rule = unsigned_rule(acl);
    // A rate-based rule per source IP, with the parameter as its limit per 5 minutes.
    let rate = &rule["Statement"]["RateBasedStatement"];
    assert_eq!(rate["AggregateKeyType"].as_str(), Some("IP"));
    assert_eq!(
        tagged(&rate["Limit"], "Ref").and_then(Value::as_str),
        Some("WafRateLimitPerIp")
    );
    assert_eq!(rate["EvaluationWindowSec"].as_u64(), Some(300));
}

#[test]
fn over_the_unsigned_limit_is_429_in_our_json_shape_with_retry_after() {
    let template = template();
    let acl = &template["Resources"]["ApiWebAcl"]["Properties"];
    let rule = unsigned_rule(acl);
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
}

#[test]
fn the_unsigned_rule_counts_only_unsigned_api_requests() {
    let template = template();
    let acl = &template["Resources"]["ApiWebAcl"]["Properties"];
    let rule = unsigned_rule(acl);
    let rate = &rule["Statement"]["RateBasedStatement"];
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
