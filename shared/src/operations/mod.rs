//! What the API does, one function per operation: from a caller and its parsed input to
//! a reply, through the store traits. Below the HTTP layer (`api`), above `store` and the
//! domain modules (`account`, `business`, `image`).

pub mod business;
pub mod images;
pub mod listing;
#[cfg(feature = "images")]
pub mod upload;
