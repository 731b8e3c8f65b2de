//! Siblings of variants (WebP, AVIF: `image_record::SiblingFormat`) made on their first
//! request. The upload makes the WebP siblings of the small and thumbnail variants
//! (`image::WEBP_SIBLINGS_AT_UPLOAD`); encoding the others would make uploads slower than
//! the 10% the WebP work may cost, and no AVIF is made at upload. So the frontend, asked for
//! a sibling that is not stored yet, asks this operation (the deployed frontend through its
//! origin group, `image-sibling`; `sitehost serve` directly): it reads the variant and its
//! original, encodes the sibling (a still variant's from the original's pixels, at its
//! size's quality: docs/image-fidelity.md), stores it next to the variant and answers it. From then on the stored file is
//! served. The same holds for images uploaded before any sibling existed.
//!
//! A variant may get no sibling in a format (an AVIF past the pixel bound or of an animated
//! GIF, `image_pipeline::sibling_of_variant`): then the sibling that stands in for it
//! (`SiblingFormat::stand_in`, the WebP) is answered.
//!
//! What a request can cost is bounded:
//! - only a path in the stored-name grammar (`image_record::upload_file`) of a sibling
//!   names a variant; any other path costs nothing, not even a lookup;
//! - a variant is read only under an encoder's permit (one per core), and at most
//!   `QUEUED_PER_ENCODER` requests per encoder wait for one: past that the answer is
//!   `Sibling::NotNow` and the caller answers the variant, unread here;
//! - one task makes a given sibling at a time, and every request for it at once waits for
//!   its answer (single-flight); once made it is served from storage. The task, not the
//!   request that started it, owns the queue's permit and the single-flight slot: a
//!   requester that goes away (a viewer closing the page) leaves the encode to finish,
//!   store the sibling and answer the others, so hang-ups neither waste an encode nor
//!   start more than the queue holds;
//! - a sibling that could not be made or stored is not tried again for `RETRY_AFTER`, and
//!   one that is not made in its format is not read again for `STAND_IN_REMEMBERED`
//!   (each remembered for at most `MAX_REMEMBERED` paths).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::Semaphore;

use crate::domain::image_record::{
    sibling_of, upload_file, variant_parts, SiblingFormat, SiblingSource, UploadFile,
};
use crate::error::{error_chain, ApiError, Result};
use crate::store::files::{content_type_of, SharedFiles};

/// Turns a stored variant (and its original) into its sibling in a format: the image
/// pipeline's, in a build with it (`deployment::siblings`). `None` when the variant gets no
/// sibling in that format (its stand-in is answered).
pub type SiblingEncoder = fn(SiblingSource<'_>, SiblingFormat) -> Result<Option<Vec<u8>>>;

/// The most a stored variant may weigh to be read: variants are at most 2048x2048, and a
/// PNG of that size with 4 channels is 16 MiB even uncompressed.
pub const MAX_VARIANT_BYTES: u64 = 32 << 20;

/// The most an original may weigh to be read for its variants' siblings: every way in
/// stores at most `SITEHOST_FETCH_MAX_BYTES` (25 MiB unless an operator raises it). An
/// original that cannot be read (larger, or a failed read) is logged, and the sibling is
/// made from its variant.
pub const MAX_ORIGINAL_BYTES: u64 = 64 << 20;

/// Requests that may wait for each encoder; past them a new sibling is not made now.
pub const QUEUED_PER_ENCODER: usize = 4;

/// How long a sibling that could not be made or stored is not tried again: as long as the
/// variant answered in its place may be cached (`api::sibling_answer::FALLBACK_CACHE_CONTROL`).
pub const RETRY_AFTER: Duration = Duration::from_secs(300);

/// How long a variant found to get no sibling in a format is answered its stand-in without
/// being read again. That never changes for a stored variant; the memory is only bounded.
pub const STAND_IN_REMEMBERED: Duration = Duration::from_secs(3600);

/// How many paths each memory (failures, stand-ins) holds at most; past it the one that
/// expires first is forgotten.
pub const MAX_REMEMBERED: usize = 1024;

/// What a sibling's path is answered with.
#[derive(Debug, Clone, PartialEq)]
pub enum Sibling {
    /// The sibling, made and stored now.
    Made(Bytes),
    /// No sibling can exist there: the path is not a sibling's, or its variant is not
    /// stored (never uploaded, or deleted, also while the sibling was being made).
    Missing,
    /// The variant gets no sibling in this format: the sibling in the format named here
    /// (stored, or to be made) is answered in its place.
    StandIn(SiblingFormat),
    /// The variant could not be encoded (logged): it is answered as it is, so the viewer
    /// still gets the image in its original format.
    Variant {
        bytes: Bytes,
        content_type: &'static str,
    },
    /// Not made now: every encoder is busy with a full queue, or this sibling failed less
    /// than `RETRY_AFTER` ago. The variant (not read here) is to be answered instead.
    NotNow,
}

/// What the encoder made of a variant, or how its task ended (a panic).
type EncodeOutcome = std::result::Result<Result<Option<Vec<u8>>>, tokio::task::JoinError>;

/// The answer of the task making a sibling, for every request that waited for it.
type Outcome = std::result::Result<Sibling, SharedError>;
type Slot = Arc<tokio::sync::Mutex<Option<Outcome>>>;

/// Built once per cold start (or once by `sitehost serve`); clones share everything.
#[derive(Clone)]
pub struct Siblings {
    inner: Arc<Inner>,
}

struct Inner {
    files: SharedFiles,
    encode: SiblingEncoder,
    /// Encodings run on the blocking pool, at most one per core at a time; a variant is
    /// read only under one of these permits, so waiting requests hold no variant.
    encoding: Semaphore,
    /// Tasks making a sibling, running or waiting for `encoding`.
    queue: Arc<Semaphore>,
    /// The sibling paths being made now.
    in_flight: Mutex<HashMap<String, Slot>>,
    failures: Mutex<Remembered>,
    stand_ins: Mutex<Remembered>,
}

impl Siblings {
    pub fn new(files: SharedFiles, encode: SiblingEncoder) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Self::with_encoders(files, encode, cores)
    }

    fn with_encoders(files: SharedFiles, encode: SiblingEncoder, encoders: usize) -> Self {
        let inner = Inner {
            files,
            encode,
            encoding: Semaphore::new(encoders),
            queue: Arc::new(Semaphore::new(encoders * (1 + QUEUED_PER_ENCODER))),
            in_flight: Mutex::default(),
            failures: Mutex::new(Remembered::default()),
            stand_ins: Mutex::new(Remembered::default()),
        };
        Siblings {
            inner: Arc::new(inner),
        }
    }

    /// The store siblings are made in.
    pub fn files(&self) -> &SharedFiles {
        &self.inner.files
    }

    /// Makes and stores the sibling at `sibling_path` (a stored path, no leading slash),
    /// or says why there is none. An error is a file store failure before anything was made.
    /// Dropping the returned future leaves the making to finish (see the module's comment).
    pub async fn make(&self, sibling_path: &str) -> Result<Sibling> {
        let Some((_, format)) = named_sibling(sibling_path) else {
            return Ok(Sibling::Missing);
        };
        let inner = &self.inner;
        let now = Instant::now();
        if let Some(stand_in) = format.stand_in() {
            if lock(&inner.stand_ins).contains(sibling_path, now) {
                return Ok(Sibling::StandIn(stand_in));
            }
        }
        if lock(&inner.failures).contains(sibling_path, now) {
            return Ok(Sibling::NotNow);
        }
        let slot = {
            let mut in_flight = lock(&inner.in_flight);
            match in_flight.get(sibling_path) {
                Some(slot) => Arc::clone(slot),
                None => {
                    let Ok(queued) = Arc::clone(&inner.queue).try_acquire_owned() else {
                        return Ok(Sibling::NotNow);
                    };
                    let slot = Slot::default();
                    // New, so free: locked before anyone can wait on it.
                    let outcome = Arc::clone(&slot)
                        .try_lock_owned()
                        .map_err(ApiError::internal)?;
                    in_flight.insert(sibling_path.to_string(), Arc::clone(&slot));
                    let leader = Leader {
                        inner: Arc::clone(inner),
                        path: sibling_path.to_string(),
                        slot: Arc::clone(&slot),
                    };
                    tokio::spawn(leader.run(format, outcome, queued));
                    slot
                }
            }
        };
        let outcome = slot.lock().await;
        match outcome.as_ref() {
            Some(done) => done.clone().map_err(|err| err.to_error()),
            // The task ended without an answer: it panicked (logged by the runtime).
            None => Err(ApiError::internal(
                "a sibling's making ended without an answer",
            )),
        }
    }
}

impl Inner {
    async fn make_now(&self, sibling_path: &str, format: SiblingFormat) -> Result<Sibling> {
        let variant = &sibling_path[..sibling_path.len() - format.extension().len() - 1];
        let Some((original_path, size)) = variant_parts(variant) else {
            return Ok(Sibling::Missing);
        };
        let Some((bytes, encoded)) = self
            .encode_now(variant, &original_path, size, format)
            .await?
        else {
            return Ok(Sibling::Missing);
        };
        let sibling = match encoded {
            Ok(Ok(Some(sibling))) => Bytes::from(sibling),
            Ok(Ok(None)) => {
                let Some(stand_in) = format.stand_in() else {
                    tracing::error!(variant, ?format, "the encoder made no sibling in a format that has no stand-in; the variant is answered");
                    self.failed(sibling_path);
                    return Ok(fallback(variant, bytes));
                };
                let until = Instant::now() + STAND_IN_REMEMBERED;
                lock(&self.stand_ins).insert(sibling_path, until);
                return Ok(Sibling::StandIn(stand_in));
            }
            Ok(Err(err)) => {
                tracing::warn!(variant, ?format, error = %error_chain(&err), "a variant's sibling could not be made; the variant is answered");
                self.failed(sibling_path);
                return Ok(fallback(variant, bytes));
            }
            Err(panicked) => {
                tracing::error!(variant, ?format, error = %panicked, "encoding a sibling panicked; the variant is answered");
                self.failed(sibling_path);
                return Ok(fallback(variant, bytes));
            }
        };
        drop(bytes);
        if let Err(err) = self
            .files
            .put(sibling_path, sibling.clone(), format.content_type())
            .await
        {
            // Still a good answer. Stored by another instance meanwhile (the embedded store
            // never replaces a file), it is served from now on; otherwise not made again for
            // a while.
            if !self.files.exists(sibling_path).await.unwrap_or(false) {
                tracing::warn!(sibling_path, error = %error_chain(&err), "a sibling made on request was not stored");
                self.failed(sibling_path);
            }
            return Ok(Sibling::Made(sibling));
        }
        // A delete of the image may have removed its files while the sibling was made: then
        // the sibling just stored would outlive them.
        match self.files.exists(variant).await {
            Ok(true) => Ok(Sibling::Made(sibling)),
            Ok(false) => {
                if let Err(err) = self.files.delete(sibling_path).await {
                    tracing::warn!(sibling_path, error = %error_chain(&err), "the sibling of a deleted variant was not removed; the sweeper will");
                }
                Ok(Sibling::Missing)
            }
            Err(err) => {
                tracing::warn!(variant, error = %error_chain(&err), "could not check that a variant outlived its sibling's making; the sweeper removes an orphan");
                Ok(Sibling::Made(sibling))
            }
        }
    }

    /// Reads the variant and its original under an encoder's permit, and encodes the
    /// sibling on the blocking pool: the variant's bytes and the encoder's outcome, or
    /// `None` when the variant is not stored.
    async fn encode_now(
        &self,
        variant: &str,
        original_path: &str,
        size: &'static str,
        format: SiblingFormat,
    ) -> Result<Option<(Bytes, EncodeOutcome)>> {
        let _encoder = self.encoding.acquire().await.map_err(ApiError::internal)?;
        let Some(bytes) = self.files.read(variant, MAX_VARIANT_BYTES).await? else {
            return Ok(None);
        };
        let original = match self.files.read(original_path, MAX_ORIGINAL_BYTES).await {
            Ok(original) => original,
            Err(err) => {
                tracing::warn!(original_path, error = %error_chain(&err), "an original could not be read; its variant's sibling is made from the variant");
                None
            }
        };
        let (encode, input) = (self.encode, bytes.clone());
        let encoded = tokio::task::spawn_blocking(move || {
            let source = SiblingSource {
                variant: &input,
                original: original.as_deref(),
                size,
            };
            encode(source, format)
        })
        .await;
        Ok(Some((bytes, encoded)))
    }

    fn failed(&self, sibling_path: &str) {
        lock(&self.failures).insert(sibling_path, Instant::now() + RETRY_AFTER);
    }
}

/// The variant of a sibling path `make` answered `NotNow` or `Variant` for, when the caller
/// must read it itself (the `image-sibling` function has no other way to the variant).
pub async fn read_variant(files: &SharedFiles, sibling_path: &str) -> Result<Sibling> {
    let Some((variant, _)) = named_sibling(sibling_path) else {
        return Ok(Sibling::Missing);
    };
    Ok(match files.read(variant, MAX_VARIANT_BYTES).await? {
        Some(bytes) => fallback(variant, bytes),
        None => Sibling::Missing,
    })
}

/// The variant and format of a sibling's path in the stored-name grammar.
fn named_sibling(path: &str) -> Option<(&str, SiblingFormat)> {
    match upload_file(path)? {
        UploadFile::Sibling(_) => sibling_of(path),
        UploadFile::Original | UploadFile::Variant => None,
    }
}

/// The task making a sibling: its entry leaves `in_flight` when it is done (or panicked).
struct Leader {
    inner: Arc<Inner>,
    path: String,
    slot: Slot,
}

impl Leader {
    /// Makes the sibling and answers everyone waiting on the slot, holding the queue's
    /// permit until then.
    async fn run(
        self,
        format: SiblingFormat,
        mut outcome: tokio::sync::OwnedMutexGuard<Option<Outcome>>,
        _queued: tokio::sync::OwnedSemaphorePermit,
    ) {
        let made = self.inner.make_now(&self.path, format).await;
        *outcome = Some(made.map_err(|err| SharedError::of(&err)));
        // The answer is in before the entry leaves `in_flight` (on drop).
        drop(outcome);
    }
}

impl Drop for Leader {
    fn drop(&mut self) {
        let mut in_flight = lock(&self.inner.in_flight);
        if in_flight
            .get(&self.path)
            .is_some_and(|slot| Arc::ptr_eq(slot, &self.slot))
        {
            in_flight.remove(&self.path);
        }
    }
}

/// A making's error, as every waiting request gets it: a temporary one stays a 503 with
/// its `Retry-After`, any other is internal (its chain logged once, here).
#[derive(Debug, Clone, PartialEq)]
enum SharedError {
    Unavailable {
        message: String,
        retry_after_secs: u64,
    },
    Internal(String),
}

impl SharedError {
    fn of(err: &ApiError) -> Self {
        match err {
            ApiError::Unavailable {
                message,
                retry_after_secs,
            } => SharedError::Unavailable {
                message: message.clone(),
                retry_after_secs: *retry_after_secs,
            },
            other => SharedError::Internal(error_chain(other)),
        }
    }

    fn to_error(&self) -> ApiError {
        match self {
            SharedError::Unavailable {
                message,
                retry_after_secs,
            } => ApiError::Unavailable {
                message: message.clone(),
                retry_after_secs: *retry_after_secs,
            },
            SharedError::Internal(chain) => ApiError::internal(chain.clone()),
        }
    }
}

/// Sibling paths remembered each until a time of its own (a failure for `RETRY_AFTER`, a
/// stand-in for `STAND_IN_REMEMBERED`), at most `MAX_REMEMBERED` of them.
#[derive(Default)]
struct Remembered {
    until: HashMap<String, Instant>,
}

impl Remembered {
    fn contains(&mut self, path: &str, now: Instant) -> bool {
        match self.until.get(path) {
            Some(until) if *until > now => true,
            Some(_) => {
                self.until.remove(path);
                false
            }
            None => false,
        }
    }

    fn insert(&mut self, path: &str, until: Instant) {
        if self.until.len() >= MAX_REMEMBERED && !self.until.contains_key(path) {
            let now = Instant::now();
            self.until.retain(|_, until| *until > now);
            if self.until.len() >= MAX_REMEMBERED {
                let oldest = self.until.iter().min_by_key(|(_, until)| **until);
                if let Some(oldest) = oldest.map(|(path, _)| path.clone()) {
                    self.until.remove(&oldest);
                }
            }
        }
        self.until.insert(path.to_string(), until);
    }
}

/// The data behind these locks stays consistent whatever panicked while holding one.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn fallback(variant: &str, bytes: Bytes) -> Sibling {
    Sibling::Variant {
        bytes,
        content_type: content_type_of(variant),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::store::memory_files::MemoryFiles;

    /// Stands in for the pipeline (tested in `image_pipeline`): the format's extension,
    /// `:` and the variant's bytes. Variants whose bytes start with `bad` cannot be encoded;
    /// `anim` ones (an animated GIF) get no AVIF.
    fn fake_encode(source: SiblingSource<'_>, format: SiblingFormat) -> Result<Option<Vec<u8>>> {
        let variant = source.variant;
        if variant.starts_with(b"bad") {
            return Err(ApiError::internal("not an image"));
        }
        if variant.starts_with(b"anim") && format == SiblingFormat::Avif {
            return Ok(None);
        }
        Ok(Some(tagged(format, variant)))
    }

    fn tagged(format: SiblingFormat, variant: &[u8]) -> Vec<u8> {
        [format.extension().as_bytes(), b":", variant].concat()
    }

    async fn store_with(files: &[(&str, &str)]) -> SharedFiles {
        let store: SharedFiles = Arc::new(MemoryFiles::new());
        for (path, bytes) in files {
            let bytes = Bytes::from(bytes.to_string());
            store.put(path, bytes, "x").await.expect("put");
        }
        store
    }

    /// Every stored path, in path order.
    async fn stored_paths(files: &SharedFiles) -> Vec<String> {
        let page = files.list("", None).await.expect("list");
        page.files.into_iter().map(|file| file.path).collect()
    }

    #[tokio::test]
    async fn a_sibling_is_made_once_from_its_stored_variant() {
        let files = store_with(&[("img/upload/a--1.big.png", "big png")]).await;
        let siblings = Siblings::new(Arc::clone(&files), fake_encode);
        let made = siblings.make("img/upload/a--1.big.png.webp").await;
        assert_eq!(
            made.expect("made"),
            Sibling::Made(Bytes::from("webp:big png"))
        );
        let stored = files.read("img/upload/a--1.big.png.webp", 100).await;
        assert_eq!(stored.expect("read"), Some(Bytes::from("webp:big png")));
        // Made again (a second edge asking at the same time): the same answer, although the
        // embedded store refuses to replace the stored one.
        let again = siblings.make("img/upload/a--1.big.png.webp").await;
        assert_eq!(
            again.expect("made"),
            Sibling::Made(Bytes::from("webp:big png"))
        );
    }

    /// The size, the variant and the original (or `-`) as the encoder was given them.
    fn source_echo(source: SiblingSource<'_>, _: SiblingFormat) -> Result<Option<Vec<u8>>> {
        let original = source.original.unwrap_or(b"-");
        Ok(Some(
            [source.size.as_bytes(), b"|", source.variant, b"|", original].concat(),
        ))
    }

    #[tokio::test]
    async fn a_sibling_is_made_from_its_variant_and_original_at_its_size() {
        let files = store_with(&[
            ("img/upload/a--1.png", "original png"),
            ("img/upload/a--1.small.png", "small png"),
            ("img/upload/b--2.large.jpg", "large jpeg"),
        ])
        .await;
        let siblings = Siblings::new(files, source_echo);
        let made = siblings.make("img/upload/a--1.small.png.avif").await;
        assert_eq!(
            made.expect("made"),
            Sibling::Made(Bytes::from("small|small png|original png"))
        );
        // An original no longer stored: the variant alone.
        let made = siblings.make("img/upload/b--2.large.jpg.webp").await;
        assert_eq!(
            made.expect("made"),
            Sibling::Made(Bytes::from("large|large jpeg|-"))
        );
    }

    /// An original is read only up to [`MAX_ORIGINAL_BYTES`] (the stores refuse more
    /// before handing any over): one over it costs a refused read, and the sibling is made
    /// from the variant.
    #[tokio::test]
    async fn an_original_over_the_read_bound_is_passed_over_for_its_variant() {
        let files = store_with(&[("img/upload/c--3.small.png", "small png")]).await;
        let over = usize::try_from(MAX_ORIGINAL_BYTES + 1).expect("fits");
        files
            .put("img/upload/c--3.png", Bytes::from(vec![0; over]), "x")
            .await
            .expect("put");
        let siblings = Siblings::new(files, source_echo);
        let made = siblings.make("img/upload/c--3.small.png.webp").await;
        assert_eq!(
            made.expect("made"),
            Sibling::Made(Bytes::from("small|small png|-"))
        );
    }

    #[tokio::test]
    async fn an_avif_sibling_is_made_and_stored_next_to_its_variant() {
        let files = store_with(&[("img/upload/a--1.medium.gif", "gif")]).await;
        let files = counting(files, false);
        let shared: SharedFiles = Arc::clone(&files) as SharedFiles;
        let siblings = Siblings::new(Arc::clone(&shared), fake_encode);
        let made = siblings.make("img/upload/a--1.medium.gif.avif").await;
        assert_eq!(made.expect("made"), Sibling::Made(Bytes::from("avif:gif")));
        let stored = shared.read("img/upload/a--1.medium.gif.avif", 100).await;
        assert_eq!(stored.expect("read"), Some(Bytes::from("avif:gif")));
        assert_eq!(
            content_type_of("img/upload/a--1.medium.gif.avif"),
            "image/avif"
        );
        // Its WebP sibling is another file, made on its own request.
        let webp = siblings.make("img/upload/a--1.medium.gif.webp").await;
        assert_eq!(webp.expect("made"), Sibling::Made(Bytes::from("webp:gif")));
    }

    #[tokio::test]
    async fn a_variant_with_no_avif_is_answered_its_webp_and_not_read_again() {
        let files = store_with(&[("img/upload/a--1.big.gif", "anim gif")]).await;
        let files = counting(files, false);
        let shared: SharedFiles = Arc::clone(&files) as SharedFiles;
        let siblings = Siblings::new(Arc::clone(&shared), fake_encode);
        for _ in 0..3 {
            let answer = siblings.make("img/upload/a--1.big.gif.avif").await;
            assert_eq!(
                answer.expect("answered"),
                Sibling::StandIn(SiblingFormat::Webp)
            );
        }
        assert_eq!(files.reads.load(Ordering::SeqCst), 1, "read once");
        assert_eq!(stored_paths(&shared).await, ["img/upload/a--1.big.gif"]);
        let webp = siblings.make("img/upload/a--1.big.gif.webp").await;
        assert_eq!(
            webp.expect("made"),
            Sibling::Made(Bytes::from("webp:anim gif"))
        );
    }

    #[tokio::test]
    async fn paths_that_name_no_stored_variant_make_nothing() {
        let files = store_with(&[
            ("img/upload/a--1.jpg", "original"),
            ("img/upload/a--1.small.webp", "a webp variant"),
            ("elsewhere/a--1.small.jpg", "not an upload"),
        ])
        .await;
        let siblings = Siblings::new(Arc::clone(&files), fake_encode);
        for path in [
            "img/upload/a--1.jpg.webp",
            "img/upload/a--1.jpg.avif",
            "img/upload/a--1.small.webp.webp",
            "img/upload/a--1.small.webp.avif",
            "img/upload/a--1.small.jpg.avif.webp",
            "elsewhere/a--1.small.jpg.webp",
            "img/upload/a--1.large.jpg.webp",
            "img/upload/a--1.large.jpg",
            "img/upload/../a--1.small.jpg.webp",
            "img/upload//a--1.small.jpg.webp",
            "img/upload/./a--1.small.jpg.webp",
            "",
        ] {
            assert_eq!(
                siblings.make(path).await.expect("answered"),
                Sibling::Missing,
                "{path}"
            );
        }
        let stored = stored_paths(&files).await;
        assert_eq!(
            stored,
            [
                "elsewhere/a--1.small.jpg",
                "img/upload/a--1.jpg",
                "img/upload/a--1.small.webp"
            ]
        );
    }

    #[tokio::test]
    async fn a_variant_that_cannot_be_encoded_is_answered_as_it_is() {
        let files = store_with(&[("img/upload/a--1.medium.gif", "bad gif")]).await;
        let siblings = Siblings::new(Arc::clone(&files), fake_encode);
        let answer = siblings.make("img/upload/a--1.medium.gif.webp").await;
        assert_eq!(
            answer.expect("answered"),
            Sibling::Variant {
                bytes: Bytes::from("bad gif"),
                content_type: "image/gif"
            }
        );
        let exists = files.exists("img/upload/a--1.medium.gif.webp").await;
        assert!(!exists.expect("exists"));
        // Not tried again for a while: the caller answers the variant.
        let again = siblings.make("img/upload/a--1.medium.gif.webp").await;
        assert_eq!(again.expect("answered"), Sibling::NotNow);
    }

    /// The file store of `store_with`, counting reads of variants (each made sibling also
    /// reads its original), and refusing every sibling put when `refuse_puts`.
    struct Counting {
        inner: SharedFiles,
        reads: AtomicUsize,
        refuse_puts: bool,
    }

    #[async_trait::async_trait]
    impl crate::store::files::FileStore for Counting {
        async fn put(&self, path: &str, bytes: Bytes, content_type: &str) -> Result<()> {
            if self.refuse_puts {
                return Err(ApiError::internal("refused"));
            }
            self.inner.put(path, bytes, content_type).await
        }
        async fn delete(&self, path: &str) -> Result<()> {
            self.inner.delete(path).await
        }
        async fn read(&self, path: &str, max_bytes: u64) -> Result<Option<Bytes>> {
            if crate::domain::image_record::is_variant_path(path) {
                self.reads.fetch_add(1, Ordering::SeqCst);
            }
            self.inner.read(path, max_bytes).await
        }
        async fn exists(&self, path: &str) -> Result<bool> {
            self.inner.exists(path).await
        }
        async fn list(
            &self,
            prefix: &str,
            next: Option<String>,
        ) -> Result<crate::store::files::FilePage> {
            self.inner.list(prefix, next).await
        }
    }

    fn counting(inner: SharedFiles, refuse_puts: bool) -> Arc<Counting> {
        Arc::new(Counting {
            inner,
            reads: AtomicUsize::new(0),
            refuse_puts,
        })
    }

    /// Encodes slowly (so that requests overlap), counting its runs in `SLOW_ENCODES`.
    static SLOW_ENCODES: AtomicUsize = AtomicUsize::new(0);
    fn slow_encode(source: SiblingSource<'_>, format: SiblingFormat) -> Result<Option<Vec<u8>>> {
        let variant = source.variant;
        SLOW_ENCODES.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(std::time::Duration::from_millis(300));
        Ok(Some(tagged(format, variant)))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn simultaneous_first_requests_make_one_encode() {
        let files = store_with(&[("img/upload/a--2.big.png", "big png")]).await;
        let siblings = Arc::new(Siblings::new(files, slow_encode));
        let before = SLOW_ENCODES.load(Ordering::SeqCst);
        let requests: Vec<_> = (0..32)
            .map(|_| {
                let siblings = Arc::clone(&siblings);
                tokio::spawn(async move { siblings.make("img/upload/a--2.big.png.webp").await })
            })
            .collect();
        for request in requests {
            let answer = request.await.expect("joined").expect("answered");
            assert_eq!(answer, Sibling::Made(Bytes::from("webp:big png")));
        }
        assert_eq!(SLOW_ENCODES.load(Ordering::SeqCst) - before, 1);
    }

    /// `slow_encode` for the queue test, apart so that the counts of each test are its own.
    fn queued_encode(source: SiblingSource<'_>, format: SiblingFormat) -> Result<Option<Vec<u8>>> {
        let variant = source.variant;
        std::thread::sleep(std::time::Duration::from_millis(300));
        Ok(Some(tagged(format, variant)))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn past_the_queue_the_variant_is_neither_read_nor_encoded() {
        let stored: Vec<(String, String)> = (0..12)
            .map(|i| {
                (
                    format!("img/upload/q--{}.big.png", i + 1),
                    format!("png {i}"),
                )
            })
            .collect();
        let refs: Vec<(&str, &str)> = stored
            .iter()
            .map(|(p, b)| (p.as_str(), b.as_str()))
            .collect();
        let files = store_with(&refs).await;
        let files = counting(files, false);
        let shared: SharedFiles = Arc::clone(&files) as SharedFiles;
        let siblings = Arc::new(Siblings::with_encoders(shared, queued_encode, 1));
        let requests: Vec<_> = stored
            .iter()
            .map(|(variant, _)| {
                let (siblings, path) = (Arc::clone(&siblings), format!("{variant}.webp"));
                tokio::spawn(async move { siblings.make(&path).await })
            })
            .collect();
        let mut made = 0;
        let mut not_now = 0;
        for request in requests {
            match request.await.expect("joined").expect("answered") {
                Sibling::Made(_) => made += 1,
                Sibling::NotNow => not_now += 1,
                other => panic!("{other:?}"),
            }
        }
        // One encoding and QUEUED_PER_ENCODER waiting; the rest answered at once, unread.
        assert_eq!(
            (made, not_now),
            (1 + QUEUED_PER_ENCODER, 12 - 1 - QUEUED_PER_ENCODER)
        );
        assert_eq!(files.reads.load(Ordering::SeqCst), 1 + QUEUED_PER_ENCODER);
    }

    /// `slow_encode` for the hang-up tests, counting its runs in `ORPHAN_ENCODES`.
    static ORPHAN_ENCODES: AtomicUsize = AtomicUsize::new(0);
    fn orphan_encode(source: SiblingSource<'_>, format: SiblingFormat) -> Result<Option<Vec<u8>>> {
        ORPHAN_ENCODES.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(std::time::Duration::from_millis(300));
        Ok(Some(tagged(format, source.variant)))
    }

    /// A request that goes away (a viewer closing the page) leaves the encode to finish and
    /// store the sibling; the next request finds it made, no second encode; and however
    /// many requesters hang up, no more encodes run than the queue holds.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_requester_that_hangs_up_leaves_the_sibling_made_and_stored() {
        let stored: Vec<(String, String)> = (0..20)
            .map(|i| {
                (
                    format!("img/upload/h--{}.big.png", i + 1),
                    format!("png {i}"),
                )
            })
            .collect();
        let refs: Vec<(&str, &str)> = stored
            .iter()
            .map(|(p, b)| (p.as_str(), b.as_str()))
            .collect();
        let files = store_with(&refs).await;
        let siblings = Siblings::with_encoders(Arc::clone(&files), orphan_encode, 1);
        let before = ORPHAN_ENCODES.load(Ordering::SeqCst);
        // Twenty requests for twenty siblings, each dropped as soon as it started.
        for (variant, _) in &stored {
            let path = format!("{variant}.webp");
            let request = siblings.make(&path);
            let _ = tokio::time::timeout(std::time::Duration::from_millis(5), request).await;
        }
        // The first is stored once its encode is done, although nobody waits for it.
        let first = format!("{}.webp", stored[0].0);
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        while files.read(&first, 100).await.expect("read").is_none() {
            assert!(
                Instant::now() < deadline,
                "the orphaned sibling was never stored"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        // Every making let in finishes and stores its sibling; the rest were refused at
        // once (the queue holds one encoding and QUEUED_PER_ENCODER waiting).
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        let queue = 1 + QUEUED_PER_ENCODER;
        while !lock(&siblings.inner.in_flight).is_empty()
            || siblings.inner.queue.available_permits() < queue
        {
            assert!(Instant::now() < deadline, "makings still running");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let encodes = ORPHAN_ENCODES.load(Ordering::SeqCst) - before;
        assert_eq!(encodes, 1 + QUEUED_PER_ENCODER);
        let made = stored_paths(&files)
            .await
            .into_iter()
            .filter(|p| p.ends_with(".webp"))
            .count();
        assert_eq!(made, encodes);
    }

    #[tokio::test]
    async fn a_sibling_that_cannot_be_stored_is_not_made_again_for_a_while() {
        let files = store_with(&[("img/upload/n--3.large.jpg", "jpeg")]).await;
        let files = counting(files, true);
        let shared: SharedFiles = Arc::clone(&files) as SharedFiles;
        let siblings = Siblings::new(shared, fake_encode);
        let first = siblings.make("img/upload/n--3.large.jpg.webp").await;
        assert_eq!(
            first.expect("made"),
            Sibling::Made(Bytes::from("webp:jpeg"))
        );
        for _ in 0..100 {
            let again = siblings.make("img/upload/n--3.large.jpg.webp").await;
            assert_eq!(again.expect("answered"), Sibling::NotNow);
        }
        assert_eq!(
            files.reads.load(Ordering::SeqCst),
            1,
            "read and encoded once"
        );
        // Remembered for RETRY_AFTER, and for a bounded number of paths.
        let mut failures = Remembered::default();
        let now = Instant::now();
        for i in 0..MAX_REMEMBERED + 10 {
            let until = now + RETRY_AFTER + Duration::from_millis(i as u64);
            failures.insert(&format!("p{i}"), until);
        }
        assert_eq!(failures.until.len(), MAX_REMEMBERED);
        assert!(!failures.contains("p0", now), "the oldest forgotten");
        let last = format!("p{}", MAX_REMEMBERED + 9);
        assert!(failures.contains(&last, now));
        assert!(!failures.contains(&last, now + RETRY_AFTER + Duration::from_secs(5)));
    }

    #[tokio::test]
    async fn a_sibling_of_an_image_deleted_meanwhile_is_removed_again() {
        for format in SiblingFormat::ALL {
            let stored = store_with(&[("img/upload/a--1.large.jpg", "jpeg")]).await;
            let files: SharedFiles = Arc::new(DeletedOnRead(stored));
            let siblings = Siblings::new(Arc::clone(&files), fake_encode);
            let path =
                crate::domain::image_record::sibling_path("img/upload/a--1.large.jpg", format);
            let answer = siblings.make(&path).await;
            assert_eq!(answer.expect("answered"), Sibling::Missing, "{path}");
            let exists = files.exists(&path).await;
            assert!(!exists.expect("exists"), "no orphan sibling: {path}");
        }
    }

    #[tokio::test]
    async fn a_variant_too_large_to_be_one_is_refused() {
        let files = store_with(&[]).await;
        let big = Bytes::from(vec![
            0u8;
            usize::try_from(MAX_VARIANT_BYTES).expect("fits") + 1
        ]);
        files
            .put("img/upload/a--1.big.png", big, "image/png")
            .await
            .expect("put");
        let siblings = Siblings::new(files, fake_encode);
        assert!(siblings.make("img/upload/a--1.big.png.webp").await.is_err());
    }

    /// A file store whose files are deleted as they are read: an image deleted while its
    /// sibling is made.
    struct DeletedOnRead(SharedFiles);

    #[async_trait::async_trait]
    impl crate::store::files::FileStore for DeletedOnRead {
        async fn put(&self, path: &str, bytes: Bytes, content_type: &str) -> Result<()> {
            self.0.put(path, bytes, content_type).await
        }
        async fn delete(&self, path: &str) -> Result<()> {
            self.0.delete(path).await
        }
        async fn read(&self, path: &str, max_bytes: u64) -> Result<Option<Bytes>> {
            let read = self.0.read(path, max_bytes).await;
            self.0.delete(path).await?;
            read
        }
        async fn exists(&self, path: &str) -> Result<bool> {
            self.0.exists(path).await
        }
    }
}
