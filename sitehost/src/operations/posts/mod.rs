//! The blog post endpoints, as the platform's client uses them: create, detail, partial
//! update, and a site's posts newest first. A post is seen through its site: a post of a
//! site the caller cannot see is a 404.

pub mod view;

use super::{Reply, Services, WriteBudget};
use crate::domain::account::Caller;
use crate::domain::post::{NewPost, Post, PostPatch, PostQuery, PAGE_STORED_BYTES};
use crate::domain::validate::{json_object, parse_id};
use crate::error::{ApiError, FieldErrors, Result};
use crate::operations::list_rules::reject_unsupported_filters;
use crate::operations::listing::{page_envelope, Paging};
use crate::operations::sites::visible_site;
use crate::store::Page;

/// The fields of a post object: a list parameter named so, other than `site_id`, is a 400
/// (`list_rules`).
const FIELDS: [&str; 8] = [
    "id",
    "site_id",
    "title",
    "content",
    "date",
    "added",
    "modified",
    "resource_uri",
];

fn not_found(id: i64) -> ApiError {
    ApiError::NotFound(format!("no post with id {id}"))
}

fn no_such_site(id: i64) -> ApiError {
    ApiError::MissingReference {
        field: "site_id",
        kind: "site",
        id,
    }
}

/// The post, if the caller may see its site.
async fn visible_post(services: &Services, caller: &Caller, id: i64) -> Result<Post> {
    let post = services
        .store
        .get_post(caller.account_id, id)
        .await?
        .ok_or_else(|| not_found(id))?;
    match visible_site(services, caller, post.site_id).await? {
        Some(_) => Ok(post),
        None => Err(not_found(id)),
    }
}

/// Creates a post; its title and content are paid for as stored
/// ([`crate::config::STORED_BYTES_PER_REQUEST`]), before anything is written.
pub async fn create(
    services: &Services,
    caller: &Caller,
    body: &[u8],
    budget: &dyn WriteBudget,
) -> Result<Reply> {
    let new = NewPost::from_json(&json_object(body)?)?;
    if visible_site(services, caller, new.site_id).await?.is_none() {
        return Err(no_such_site(new.site_id));
    }
    budget
        .pay_for_stored((new.title.len() + new.content.len()) as u64)
        .await?;
    let post = services
        .store
        .create_post(caller.account_id, new, services.clock.now())
        .await?;
    tracing::info!(post_id = post.id, site_id = post.site_id, "post created");
    Ok(Reply::created(
        view::post(&post),
        view::resource_uri(post.id),
    ))
}

pub async fn get(services: &Services, caller: &Caller, id: i64) -> Result<Reply> {
    Ok(Reply::ok(view::post(
        &visible_post(services, caller, id).await?,
    )))
}

/// Updates a post; the whole post is rewritten, so it pays for its title and content as
/// they will be stored (nothing more when nothing changes).
pub async fn update(
    services: &Services,
    caller: &Caller,
    id: i64,
    body: &[u8],
    budget: &dyn WriteBudget,
) -> Result<Reply> {
    let body = json_object(body)?;
    let current = visible_post(services, caller, id).await?;
    let patch = PostPatch::from_json(&body, id, current.site_id)?;
    let mut after = current.clone();
    if after.apply(&patch, current.modified) {
        budget.pay_for_stored(after.stored_bytes()).await?;
    }
    let post = services
        .store
        .update_post(caller.account_id, id, patch, services.clock.now())
        .await?
        .ok_or_else(|| not_found(id))?;
    Ok(Reply::ok(view::post(&post)))
}

/// `?site_id=` (required): the site's posts, newest first. A site the caller cannot see
/// has none.
pub async fn list(
    services: &Services,
    caller: &Caller,
    query_pairs: &[(String, String)],
) -> Result<Reply> {
    let paging = Paging::parse(query_pairs)?;
    reject_unsupported_filters(query_pairs, &FIELDS, &["site_id"])?;
    let mut fields = FieldErrors::default();
    let mut site_id = None;
    for (name, value) in query_pairs {
        match name.as_str() {
            "site_id" => match parse_id(value) {
                Some(id) => site_id = Some(id),
                None => fields.add("site_id", format!("'{value}' is not a positive integer.")),
            },
            "order_by" if value != "-date" => fields.add(
                "order_by",
                format!("'{value}' is not an allowed ordering; posts list newest first (-date)."),
            ),
            _ => {}
        }
    }
    if site_id.is_none() && fields.is_empty() {
        fields.add(
            "site_id",
            "This filter is required: posts are listed by site.",
        );
    }
    fields.into_result()?;
    let site_id = site_id.ok_or_else(|| ApiError::internal("site_id passed unchecked"))?;
    let page = match visible_site(services, caller, site_id).await? {
        Some(_) => {
            let query = PostQuery {
                site_id,
                limit: paging.limit,
                offset: paging.offset,
                max_bytes: PAGE_STORED_BYTES,
            };
            services.store.list_posts(caller.account_id, &query).await?
        }
        None => Page::empty(),
    };
    Ok(Reply::ok(page_envelope(
        view::LIST_PATH,
        query_pairs,
        paging,
        &page,
        view::post,
    )))
}
