//! The CloudFront `/api/*` behaviour forwards what signature checks need, with the generated
//! origin-verify secret that the functions compare; files get `X-Content-Type-Options:
//! nosniff`, a custom domain TLS 1.2 at least; origin failures are answered with our JSON
//! error.

use std::collections::BTreeSet;

use serde_yaml::Value;

use super::{functions, globals_value, referenced, str_of, tagged, template, workspace_root};

const CACHING_DISABLED: &str = "4135ea2d-6df8-44a3-9df3-4b5a84be39ad";
const ALL_VIEWER_EXCEPT_HOST_HEADER: &str = "b689b0a8-53d0-40ab-baf2-68738e2966ac";

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
    // A !Sub of the stack's Production (cloudfront_events.rs runs both), here a trial stack.
    let code = tagged(&resources[function_id]["Properties"]["FunctionCode"], "Sub")
        .and_then(Value::as_str)
        .expect("FunctionCode: !Sub")
        .replace("${Production}", "false");
    let code = code.as_str();
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
