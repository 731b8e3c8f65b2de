//! Blog posts: a site's posts, each a title and the partner's HTML. The HTML is stored and
//! answered exactly as sent: it is served by the partner's sites, never by this service,
//! so it is not parsed or cleaned here. What a post looks like over HTTP is
//! `operations::posts`.

use chrono::NaiveDateTime;
use serde_json::{Map, Value};

use crate::domain::validate;
use crate::error::{ApiError, FieldErrors, Result};

pub const MAX_TITLE_CHARS: usize = 255;
/// The most bytes (UTF-8) of a post's content: a long article with inline markup, well
/// within a DynamoDB item (400 KB) with its other fields.
pub const MAX_CONTENT_BYTES: usize = 100_000;

#[derive(Debug, Clone, PartialEq)]
pub struct Post {
    pub id: i64,
    pub account_id: i64,
    pub site_id: i64,
    pub title: String,
    pub content: String,
    /// The publication date, unix seconds.
    pub date: i64,
    pub added: i64,
    pub modified: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NewPost {
    pub site_id: i64,
    pub title: String,
    pub content: String,
    /// `None`: now.
    pub date: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct PostPatch {
    pub title: Option<String>,
    pub content: Option<String>,
    pub date: Option<i64>,
}

/// The most bytes of posts (title and content, UTF-8, as [`Post::stored_bytes`] counts
/// them) one page reads: a page ends before the post that would pass it (a page holds at
/// least one post). With at most 100,000 bytes of content a post, a page of the largest
/// posts holds 9; its JSON stays well within Lambda's 6 MB response
/// (`operations::listing::PAGE_MAX_BYTES`), and on DynamoDB it reads about 250 read units
/// of records, where a full page of them read 25,000.
pub const PAGE_STORED_BYTES: u64 = 1_000_000;

/// A site's posts, newest first (by `date`, then by id): at most `limit`, and no more than
/// `max_bytes` of them ([`PAGE_STORED_BYTES`]) past the first.
#[derive(Debug, Clone, PartialEq)]
pub struct PostQuery {
    pub site_id: i64,
    pub limit: u64,
    pub offset: u64,
    pub max_bytes: u64,
}

/// A page's posts as a store reads them in order: each is admitted while the page stays
/// within its bytes ([`PostQuery::max_bytes`]); the first always is.
#[derive(Debug, Clone, Copy)]
pub struct PageBytes {
    used: u64,
    max: u64,
    started: bool,
}

impl PageBytes {
    pub fn new(max: u64) -> Self {
        PageBytes {
            used: 0,
            max,
            started: false,
        }
    }

    /// Whether `post` joins the page (and counts it if so). Once one is refused, the page
    /// ends there: the next page starts with it.
    pub fn admit(&mut self, post: &Post) -> bool {
        let used = self.used.saturating_add(post.stored_bytes());
        if self.started && used > self.max {
            return false;
        }
        self.used = used;
        self.started = true;
        true
    }

    /// What the admitted posts took.
    pub fn used(&self) -> u64 {
        self.used
    }
}

impl NewPost {
    pub fn from_json(body: &Map<String, Value>) -> Result<Self> {
        let mut fields = FieldErrors::default();
        let site_id = match body.get("site_id") {
            None | Some(Value::Null) => {
                fields.add("site_id", "This field is required.");
                None
            }
            Some(value) => validate::id_value(value).or_else(|| {
                fields.add("site_id", "Must be a positive integer.");
                None
            }),
        };
        let title = text(&mut fields, body, "title", true).flatten();
        let content = content(&mut fields, body, true);
        let date = date(&mut fields, body);
        fields.into_result()?;
        match (site_id, title, content) {
            (Some(site_id), Some(title), Some(content)) => Ok(NewPost {
                site_id,
                title,
                content,
                date,
            }),
            _ => Err(ApiError::internal("a required post field passed unchecked")),
        }
    }

    pub fn into_post(self, id: i64, account_id: i64, now: i64) -> Post {
        Post {
            id,
            account_id,
            site_id: self.site_id,
            title: self.title,
            content: self.content,
            date: self.date.unwrap_or(now),
            added: now,
            modified: now,
        }
    }
}

impl PostPatch {
    /// A partial update of post `id`: only the fields given change. `site_id` may be sent
    /// back as it is, not changed.
    pub fn from_json(body: &Map<String, Value>, id: i64, site_id: i64) -> Result<Self> {
        let mut fields = FieldErrors::default();
        if let Some(given) = body.get("id").filter(|v| !v.is_null()) {
            if validate::id_value(given) != Some(id) {
                fields.add(
                    "id",
                    format!("Must be {id}, the id in the path, or absent."),
                );
            }
        }
        if let Some(given) = body.get("site_id") {
            if validate::id_value(given) != Some(site_id) {
                fields.add(
                    "site_id",
                    "A post stays on its site; create a new post instead.",
                );
            }
        }
        let patch = PostPatch {
            title: text(&mut fields, body, "title", false).flatten(),
            content: content(&mut fields, body, false),
            date: date(&mut fields, body),
        };
        fields.into_result()?;
        Ok(patch)
    }
}

impl Post {
    /// What the post stores beyond its fixed fields: its title and content (UTF-8). What a
    /// write pays for ([`crate::config::STORED_BYTES_PER_REQUEST`]) and what a page of
    /// posts is bounded by ([`PAGE_STORED_BYTES`]).
    pub fn stored_bytes(&self) -> u64 {
        (self.title.len() + self.content.len()) as u64
    }

    pub fn apply(&mut self, patch: &PostPatch, now: i64) -> bool {
        let before = self.clone();
        if let Some(v) = &patch.title {
            self.title = v.clone();
        }
        if let Some(v) = &patch.content {
            self.content = v.clone();
        }
        if let Some(v) = patch.date {
            self.date = v;
        }
        let changed = *self != before;
        if changed {
            self.modified = now;
        }
        changed
    }
}

/// The title: required on create, never null.
fn text(
    fields: &mut FieldErrors,
    body: &Map<String, Value>,
    name: &str,
    required: bool,
) -> Option<Option<String>> {
    let value = match body.get(name) {
        None if !required => return None,
        None | Some(Value::Null) => {
            fields.add(name, "This field is required and may not be null.");
            return None;
        }
        Some(value) => value,
    };
    match validate::text_value(value, MAX_TITLE_CHARS) {
        Ok(Some(text)) if !validate::renders_blank(&text) => Some(Some(validate::nfc(&text))),
        Ok(_) => {
            fields.add(name, validate::BLANK_NAME_MESSAGE);
            None
        }
        Err(message) => {
            fields.add(name, message);
            None
        }
    }
}

/// Whether `c` may be in a post's content: text, so no control character but tab, line
/// feed and carriage return (JSON writes each other one as six bytes, `\u0001`, which made a
/// 100,000-byte post a 600,000-byte object in every page that lists it).
pub fn content_char_allowed(c: char) -> bool {
    !c.is_control() || matches!(c, '\t' | '\n' | '\r')
}

/// The content, kept byte for byte (the partner's HTML), at most [`MAX_CONTENT_BYTES`], of
/// text only ([`content_char_allowed`]).
fn content(fields: &mut FieldErrors, body: &Map<String, Value>, required: bool) -> Option<String> {
    match body.get("content") {
        None if !required => None,
        Some(Value::String(html)) if html.len() <= MAX_CONTENT_BYTES => {
            match html.chars().find(|&c| !content_char_allowed(c)) {
                None => Some(html.clone()),
                Some(c) => {
                    fields.add(
                        "content",
                        format!(
                            "Must be text: the control character U+{:04X} is not allowed (tab, \
                             line feed and carriage return are).",
                            u32::from(c)
                        ),
                    );
                    None
                }
            }
        }
        Some(Value::String(html)) => {
            fields.add(
                "content",
                format!(
                    "This content is {} bytes; a post's content may have at most \
                     {MAX_CONTENT_BYTES} bytes (UTF-8).",
                    html.len()
                ),
            );
            None
        }
        _ => {
            fields.add("content", "This field is required: a string of HTML.");
            None
        }
    }
}

/// `date`: `YYYY-MM-DDTHH:MM:SS` (UTC, as every timestamp here), from 1970 on.
fn date(fields: &mut FieldErrors, body: &Map<String, Value>) -> Option<i64> {
    let value = body.get("date").filter(|v| !v.is_null())?;
    let parsed = value
        .as_str()
        .and_then(|text| NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S").ok())
        .map(|t| t.and_utc().timestamp())
        .filter(|&t| (0..=253_402_300_799).contains(&t));
    if parsed.is_none() {
        fields.add(
            "date",
            "Must be a UTC date and time like 2024-05-01T09:30:00, from 1970 to 9999.",
        );
    }
    parsed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    fn named(result: Result<impl std::fmt::Debug>) -> Vec<String> {
        match result {
            Err(ApiError::Validation(map)) => map.into_keys().collect(),
            other => vec![format!("{other:?}")],
        }
    }

    #[test]
    fn a_post_keeps_its_html_as_sent() {
        let html = "<h2>Hi</h2>\n<script>x()</script>";
        let new = NewPost::from_json(&object(
            json!({"site_id": 3, "title": "T", "content": html}),
        ));
        let post = new.map(|n| n.into_post(1, 1, 60));
        assert_eq!(post.as_ref().map(|p| p.content.as_str()).ok(), Some(html));
        assert_eq!(post.map(|p| p.date).ok(), Some(60));
    }

    #[test]
    fn bad_posts_name_their_fields() {
        assert_eq!(
            named(NewPost::from_json(&object(json!({})))),
            ["content", "site_id", "title"]
        );
        let big = "x".repeat(MAX_CONTENT_BYTES + 1);
        let body = object(
            json!({"site_id": 1, "title": "T", "content": big, "date": "2024-13-01T00:00:00"}),
        );
        assert_eq!(named(NewPost::from_json(&body)), ["content", "date"]);
        for control in ["\u{1}", "a\u{0}b", "\u{1b}[0m", "\u{7f}", "\u{85}"] {
            let body = object(json!({"site_id": 1, "title": "T", "content": control}));
            assert_eq!(named(NewPost::from_json(&body)), ["content"], "{control:?}");
            assert_eq!(
                named(PostPatch::from_json(&body, 1, 1)),
                ["content"],
                "{control:?}"
            );
        }
        let prose = object(json!({"site_id": 1, "title": "T", "content": "a\tb\r\nc é"}));
        assert!(NewPost::from_json(&prose).is_ok());
        let moved = object(json!({"site_id": 9}));
        assert_eq!(named(PostPatch::from_json(&moved, 1, 2)), ["site_id"]);
        let patch = PostPatch::from_json(&object(json!({"title": "New", "site_id": 2})), 1, 2);
        assert_eq!(patch.ok().and_then(|p| p.title).as_deref(), Some("New"));
    }
}
