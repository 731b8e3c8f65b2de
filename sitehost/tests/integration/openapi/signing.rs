//! The document's signing example is what our signer computes.

use sitehost::api::params;
use sitehost::auth::oauth1;

use crate::support::openapi::document;

#[test]
fn the_signing_example_is_what_our_signer_computes() {
    let description = document()["components"]["securitySchemes"]["oauth1"]["description"]
        .as_str()
        .expect("the oauth1 scheme has a description");
    let (key, secret) = (
        "pamuJL7pb1PEYMKig4Tj",
        "JZ7hoqFM4bTDiqLGlxQjXeO6J8QcoC8YawOuVtGo",
    );
    let (timestamp, nonce) = (1_795_000_000, "170694528916440158243371858911263853914");
    let url = "http://127.0.0.1:3000/api/v2/businesses/";
    let query = params::parse("deleted=0&order_by=business_name").expect("query");
    let header = oauth1::authorization_header("GET", url, &query, key, secret, timestamp, nonce);
    let mut params = query.clone();
    params.extend(oauth1::parse_authorization(&header).expect("our own header"));
    let base = oauth1::base_string("GET", url, &params);
    let signature = oauth1::sign(secret, &base);
    assert_eq!(signature, "mN/RykDy7Jq/1oWjGNur6Hzwe6Y=");
    let hmac_key = format!("{secret}&");
    for (what, expected) in [
        ("base string", base.as_str()),
        ("signature", signature.as_str()),
        ("Authorization header", header.as_str()),
        ("key", hmac_key.as_str()),
    ] {
        assert!(
            description.contains(expected),
            "the example's {what} is not in the document: {expected}"
        );
    }
    // The same example in the document's introduction.
    let intro = document()["info"]["description"].as_str().expect("intro");
    assert!(intro.contains(&base) && intro.contains(&signature));
}
