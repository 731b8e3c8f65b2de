//! The `sitehost` command's tests, one binary (each test binary links the whole stack):
//! `commands` (serve, keys, files sweep, variants), `docs_page` (the reference page in
//! headless Chromium), `webp_page` (an uploaded JPEG's small variant in an `<img>`, as
//! headless Chromium receives it: its AVIF sibling), `animated_page` (an animated GIF's
//! medium variant in an `<img>`, an animation as Chromium decodes it), `lambda` (every
//! function binary under a local Lambda Runtime API, and `events sign`) and
//! `node_partner` (the Node.js OAuth libraries against `serve`). Tests start their own
//! processes and ports; nothing here changes process-wide state.

mod animated_page;
mod commands;
mod docs_page;
mod lambda;
mod node_partner;
mod support;
mod webp_page;
