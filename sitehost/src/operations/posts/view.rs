//! How a blog post looks to a client, and its paths.

use serde_json::{json, Value};

use crate::clock::format_timestamp;
use crate::domain::post::Post;

pub const LIST_PATH: &str = "/api/v2/posts/";

pub fn resource_uri(id: i64) -> String {
    format!("{LIST_PATH}{id}/")
}

/// The post: `content` is the partner's HTML exactly as sent.
pub fn post(post: &Post) -> Value {
    json!({
        "id": post.id,
        "site_id": post.site_id,
        "title": post.title,
        "content": post.content,
        "date": format_timestamp(post.date),
        "added": format_timestamp(post.added),
        "modified": format_timestamp(post.modified),
        "resource_uri": resource_uri(post.id),
    })
}
