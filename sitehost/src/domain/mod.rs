//! The records and their rules: what a client may send and what is stored, with no HTTP,
//! no storage and no cargo feature. How a resource looks over HTTP is the operations
//! layer's; how it is stored is the store's.

pub mod account;
pub mod business;
pub mod collation;
pub mod image_record;
pub mod location;
pub mod post;
pub mod site;
pub mod validate;
