//! The resolver of the strict fetch client: a name is looked up once and refused if any of
//! its addresses is not public, and the connector gets exactly the addresses checked, so
//! no DNS rebinding can slip in between the check and the connection.

use std::net::SocketAddr;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use super::check_ip;

/// Resolves with the system resolver, then refuses the name if ANY address is non-public
/// (a name with one public and one private address could otherwise be steered to the
/// private one). What it returns is exactly what was checked, so connect needs no
/// second lookup.
#[derive(Debug, Clone, Copy)]
pub(super) struct VettingResolver;

impl Resolve for VettingResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            // Port 0: reqwest puts the URL's (or the scheme's) port in.
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await
                .map_err(ResolveRefusal::Lookup)?
                .collect();
            if addrs.is_empty() {
                return Err(ResolveRefusal::NoAddresses.into());
            }
            for addr in &addrs {
                check_ip(addr.ip()).map_err(ResolveRefusal::Blocked)?;
            }
            let addrs: Addrs = Box::new(addrs.into_iter());
            Ok(addrs)
        })
    }
}

/// Why [`VettingResolver`] gave no address; found again in reqwest's error chain.
#[derive(Debug, thiserror::Error)]
pub(super) enum ResolveRefusal {
    #[error("resolves to a non-public address ({0})")]
    Blocked(&'static str),
    #[error("resolved to no address")]
    NoAddresses,
    #[error("lookup failed: {0}")]
    Lookup(std::io::Error),
}
