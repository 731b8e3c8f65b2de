//! The body of `POST /api/v2/images/`: exactly one image source (a URL, base64 content or
//! a staged upload's `upload_id`) and the optional site and business ids.

use serde_json::{Map, Value};

use crate::error::{ApiError, FieldErrors, Result};

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Source {
    Url(String),
    Base64 {
        name: Option<String>,
        data: String,
    },
    /// A staged upload's `upload_id` (`operations::images::staged`).
    Staged(String),
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct UploadRequest {
    pub(super) source: Source,
    pub(super) site_id: Option<i64>,
    pub(super) business_id: Option<i64>,
}

impl UploadRequest {
    /// Takes the body by value: the base64 content (megabytes) moves out of it uncopied.
    pub(super) fn from_json(mut body: Map<String, Value>) -> Result<Self> {
        let mut fields = FieldErrors::default();
        let site_id = crate::domain::validate::optional_id(&mut fields, &body, "site_id").flatten();
        let business_id =
            crate::domain::validate::optional_id(&mut fields, &body, "business_id").flatten();
        let upload = body.remove("upload").filter(|v| !v.is_null());
        let url = body.get("external_url").filter(|v| !v.is_null());
        let staged = body.get("upload_id").filter(|v| !v.is_null());
        let given = [url.is_some(), upload.is_some(), staged.is_some()];
        let source = match (url, upload) {
            _ if given.iter().filter(|g| **g).count() > 1 => {
                fields.add(
                    "__all__",
                    "Give one of external_url, upload and upload_id, not several.",
                );
                None
            }
            // Several sources: answered by the arm above.
            (Some(_), Some(_)) => None,
            (None, None) => match staged {
                Some(Value::String(upload_id)) => Some(Source::Staged(upload_id.clone())),
                Some(_) => {
                    fields.add(
                        "upload_id",
                        "Must be a string, as the staged upload gave it.",
                    );
                    None
                }
                None => {
                    fields.add("__all__", "Give external_url (a public http(s) URL), upload ({\"name\": ..., \"file\": <base64>}) or upload_id (a staged upload's).");
                    None
                }
            },
            (Some(Value::String(url)), None) => Some(Source::Url(url.trim().to_string())),
            (Some(_), None) => {
                fields.add("external_url", "Must be a string URL.");
                None
            }
            (None, Some(Value::Object(mut upload))) => {
                let name = ["name", "filename"]
                    .iter()
                    .find_map(|k| upload.get(*k).and_then(Value::as_str))
                    .map(str::to_string);
                match upload.remove("file") {
                    Some(Value::String(data)) => Some(Source::Base64 { name, data }),
                    Some(_) => {
                        fields.add_at(&["upload", "file"], "Must be a base64 string.");
                        None
                    }
                    None => {
                        fields.add_at(
                            &["upload", "file"],
                            "Required: the image content in base64.",
                        );
                        None
                    }
                }
            }
            (None, Some(_)) => {
                fields.add(
                    "upload",
                    "Must be an object: {\"name\": \"photo.jpg\", \"file\": \"<base64>\"}.",
                );
                None
            }
        };
        fields.into_result()?;
        let source = source.ok_or_else(|| ApiError::invalid("no image source"))?;
        Ok(UploadRequest {
            source,
            site_id,
            business_id,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn exactly_one_source() {
        assert!(UploadRequest::from_json(body(json!({"site_id": 1}))).is_err());
        assert!(UploadRequest::from_json(body(
            json!({"external_url": "https://x/a.jpg", "upload": {"file": "AA=="}})
        ))
        .is_err());
        assert!(UploadRequest::from_json(body(json!({"upload": "AA=="}))).is_err());
        assert!(UploadRequest::from_json(body(
            json!({"upload_id": "ab", "external_url": "https://x/a.jpg"})
        ))
        .is_err());
        assert!(UploadRequest::from_json(body(json!({"upload_id": 12}))).is_err());
        assert_eq!(
            UploadRequest::from_json(body(json!({"upload_id": "ab", "site_id": 3})))
                .ok()
                .map(|r| r.source),
            Some(Source::Staged("ab".into()))
        );
        assert!(UploadRequest::from_json(body(
            json!({"upload": {"file": "AA=="}, "site_id": "x"})
        ))
        .is_err());
        let ok = UploadRequest::from_json(body(
            json!({"upload": {"filename": "a.png", "file": "AA=="}, "site_id": 12, "type": "image"}),
        ));
        assert_eq!(
            ok.ok().map(|r| (r.site_id, r.source)),
            Some((
                Some(12),
                Source::Base64 {
                    name: Some("a.png".into()),
                    data: "AA==".into()
                }
            ))
        );
    }
}
