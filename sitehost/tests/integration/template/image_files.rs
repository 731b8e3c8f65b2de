//! Image files (`/img/upload/*`): the viewer-request function and the cache behaviours pick
//! a variant or its WebP sibling by Accept, and junk never reaches the sibling function.

use std::collections::BTreeSet;
use std::path::Path;

use serde_yaml::Value;

use super::{referenced, str_of, tagged, template};

/// The first cache behaviour of `/img/upload/`: a variant size's, the one all are alike to.
fn variant_behaviour(config: &Value) -> &Value {
    config["CacheBehaviors"]
        .as_sequence()
        .expect("CacheBehaviors")
        .iter()
        .find(|b| {
            b["PathPattern"]
                .as_str()
                .is_some_and(|p| p.starts_with("/img/upload/"))
        })
        .expect("an /img/upload/ behaviour")
}

/// One behaviour per variant size goes to the origin group (the bucket first; where it has
/// no file, the sibling maker), then the rest of the directory to the bucket alone.
#[test]
fn image_files_go_by_variant_size_to_the_origin_group_then_to_the_bucket() {
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
}

/// The sibling maker is a function URL that takes only signed requests, signed for by an
/// origin access control, and only this distribution may call it.
#[test]
fn only_the_distribution_may_call_the_sibling_maker_and_only_signed() {
    let template = template();
    let resources = &template["Resources"];
    let config = &resources["Distribution"]["Properties"]["DistributionConfig"];
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
}

/// Image files are cached on the normalised Accept alone, for up to a year, and responses
/// say `Vary: Accept`.
#[test]
fn image_files_are_cached_by_the_normalised_accept_and_vary_on_it() {
    let template = template();
    let resources = &template["Resources"];
    let config = &resources["Distribution"]["Properties"]["DistributionConfig"];
    let files = variant_behaviour(config);
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
}

/// The viewer-request function picks the WebP sibling of a small or thumbnail variant when
/// Accept names image/webp, and normalises Accept (`image/webp` or none), which the cache
/// policy keys on.
#[test]
fn the_viewer_request_function_picks_siblings_and_normalises_accept() {
    let template = template();
    let resources = &template["Resources"];
    let config = &resources["Distribution"]["Properties"]["DistributionConfig"];
    let files = variant_behaviour(config);
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
// Reads better whole: a table of requests and what the function makes of them.
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
    // The shared Accept cases (api::sibling_answer::chosen_sibling is held to the same list).
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
/// held to (the Rust side in `api::sibling_answer`).
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
// Reads better whole: one node run answers every path, and the checks read its answers in order.
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
