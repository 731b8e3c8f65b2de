//! An S3 presigned POST: the HTML form fields that let a client upload one object straight
//! to S3, within a policy signed with SigV4. The AWS SDK for Rust presigns GET and PUT
//! requests but not POST policies, so the policy is built here as AWS documents it
//! ("Creating a POST policy",
//! <https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-HTTPPOSTConstructPolicy.html>;
//! "Example: Browser-based upload using HTTP POST (using AWS signature version 4)",
//! <https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-post-example.html>): the
//! string to sign is the policy's base64, signed with the SDK's own signing key and
//! signature functions (`aws-sigv4`).

use std::time::{Duration, UNIX_EPOCH};

use base64::Engine;
use serde_json::{json, Value};

use crate::error::{ApiError, Result};

/// The one algorithm S3 POST policies take with SigV4.
const ALGORITHM: &str = "AWS4-HMAC-SHA256";

/// What a presigned POST allows: one object at `key` in `bucket`, of 1 to `max_bytes`
/// bytes, posted before `expires_at`.
#[derive(Debug, Clone)]
pub struct PostPolicy<'a> {
    pub bucket: &'a str,
    pub key: &'a str,
    pub max_bytes: u64,
    /// Unix seconds.
    pub expires_at: i64,
}

/// The credentials and place it is signed for.
#[derive(Debug, Clone)]
pub struct Signer<'a> {
    pub access_key_id: &'a str,
    pub secret_access_key: &'a str,
    /// Temporary credentials' token (a Lambda role's): a field and a condition of its own.
    pub session_token: Option<&'a str>,
    pub region: &'a str,
    /// Unix seconds: the signature's date.
    pub now: i64,
}

fn utc(secs: i64, format: &str) -> Result<String> {
    let time = chrono::DateTime::from_timestamp(secs, 0)
        .ok_or_else(|| ApiError::internal(format!("a time out of range: {secs}")))?;
    Ok(time.format(format).to_string())
}

/// The form fields, in the order a client sends them (the file goes after them, as
/// `file`): `key`, the algorithm, credential, date, security token (with temporary
/// credentials), the base64 policy and its signature.
pub fn presigned_post_fields(
    policy: &PostPolicy<'_>,
    signer: &Signer<'_>,
) -> Result<Vec<(String, String)>> {
    let date = utc(signer.now, "%Y%m%d")?;
    let amz_date = utc(signer.now, "%Y%m%dT%H%M%SZ")?;
    let credential = format!(
        "{}/{date}/{}/s3/aws4_request",
        signer.access_key_id, signer.region
    );
    let mut fields = vec![
        ("key".to_string(), policy.key.to_string()),
        ("x-amz-algorithm".to_string(), ALGORITHM.to_string()),
        ("x-amz-credential".to_string(), credential),
        ("x-amz-date".to_string(), amz_date),
    ];
    if let Some(token) = signer.session_token {
        fields.push(("x-amz-security-token".to_string(), token.to_string()));
    }
    // Every field but the policy and signature is a condition, matched exactly.
    let mut conditions: Vec<Value> = vec![
        json!({ "bucket": policy.bucket }),
        json!(["content-length-range", 1, policy.max_bytes]),
    ];
    conditions.extend(fields.iter().map(|(name, value)| json!({ name: value })));
    let document = json!({
        "expiration": utc(policy.expires_at, "%Y-%m-%dT%H:%M:%S.000Z")?,
        "conditions": conditions,
    });
    let encoded = base64::engine::general_purpose::STANDARD.encode(document.to_string());
    let signing_key = aws_sigv4::sign::v4::generate_signing_key(
        signer.secret_access_key,
        UNIX_EPOCH + Duration::from_secs(u64::try_from(signer.now).unwrap_or_default()),
        signer.region,
        "s3",
    );
    let signature = aws_sigv4::sign::v4::calculate_signature(signing_key, encoded.as_bytes());
    fields.push(("policy".to_string(), encoded));
    fields.push(("x-amz-signature".to_string(), signature));
    Ok(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field<'a>(fields: &'a [(String, String)], name: &str) -> &'a str {
        fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or_default()
    }

    #[test]
    fn the_policy_binds_the_bucket_key_size_and_expiry() {
        let policy = PostPolicy {
            bucket: "staging-bucket",
            key: "staging/0123abcd",
            max_bytes: 5_508_789,
            expires_at: 1_451_347_200 + 900,
        };
        let signer = Signer {
            access_key_id: "AKIAIOSFODNN7EXAMPLE",
            secret_access_key: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            session_token: Some("token"),
            region: "us-east-1",
            now: 1_451_347_200,
        };
        let fields = presigned_post_fields(&policy, &signer).unwrap_or_default();
        let names: Vec<&str> = fields.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "key",
                "x-amz-algorithm",
                "x-amz-credential",
                "x-amz-date",
                "x-amz-security-token",
                "policy",
                "x-amz-signature"
            ]
        );
        assert_eq!(
            field(&fields, "x-amz-credential"),
            "AKIAIOSFODNN7EXAMPLE/20151229/us-east-1/s3/aws4_request"
        );
        assert_eq!(field(&fields, "x-amz-date"), "20151229T000000Z");
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(field(&fields, "policy"))
            .unwrap_or_default();
        let document: Value = serde_json::from_slice(&decoded).unwrap_or_default();
        assert_eq!(document["expiration"], "2015-12-29T00:15:00.000Z");
        let conditions = document["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for expected in [
            json!({"bucket": "staging-bucket"}),
            json!(["content-length-range", 1, 5_508_789]),
            json!({"key": "staging/0123abcd"}),
            json!({"x-amz-algorithm": "AWS4-HMAC-SHA256"}),
            json!({"x-amz-credential": "AKIAIOSFODNN7EXAMPLE/20151229/us-east-1/s3/aws4_request"}),
            json!({"x-amz-date": "20151229T000000Z"}),
            json!({"x-amz-security-token": "token"}),
        ] {
            assert!(
                conditions.contains(&expected),
                "{expected} in {conditions:?}"
            );
        }
        assert_eq!(conditions.len(), 7);
        // The signature is the SDK signer's (aws-sigv4, tested there) over the policy's
        // base64: hex SHA-256, and another policy signs differently.
        let signature = field(&fields, "x-amz-signature");
        assert!(signature.len() == 64 && signature.bytes().all(|b| b.is_ascii_hexdigit()));
        let other = PostPolicy {
            max_bytes: 1,
            ..policy
        };
        let other = presigned_post_fields(&other, &signer).unwrap_or_default();
        assert_ne!(field(&other, "x-amz-signature"), signature);
    }

    #[test]
    fn long_lived_credentials_send_no_token() {
        let policy = PostPolicy {
            bucket: "b",
            key: "staging/k",
            max_bytes: 1,
            expires_at: 900,
        };
        let signer = Signer {
            access_key_id: "a",
            secret_access_key: "s",
            session_token: None,
            region: "eu-west-1",
            now: 0,
        };
        let fields = presigned_post_fields(&policy, &signer).unwrap_or_default();
        assert!(fields.iter().all(|(n, _)| n != "x-amz-security-token"));
    }
}
