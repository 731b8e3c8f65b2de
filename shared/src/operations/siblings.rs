//! WebP siblings made on their first request. The upload makes the siblings of the small
//! and thumbnail variants (`image::WEBP_SIBLINGS_AT_UPLOAD`); encoding the others would
//! make uploads slower than the 10% the WebP work may cost. So the frontend, asked for a
//! sibling that is not stored yet, asks this operation (the deployed frontend through its
//! origin group, `image-sibling`; `sitehost serve` directly): it reads the variant, encodes
//! its sibling, stores it next to it and answers it. From then on the stored file is
//! served. The same holds for images uploaded before any sibling existed.
//!
//! What a request can cost is bounded: a path names at most one stored variant (at most
//! 2048 px a side, `MAX_VARIANT_BYTES`), each sibling is made once and then served from
//! storage, and a path that names no stored variant costs one lookup.

use bytes::Bytes;
use tokio::sync::Semaphore;

use crate::error::{error_chain, Result};
use crate::image_record::variant_of_webp_sibling;
use crate::store::files::{content_type_of, SharedFiles};

/// Turns a stored variant's bytes into its WebP sibling: the image pipeline's, in a build
/// with it (`deployment::webp_siblings`).
pub type SiblingEncoder = fn(&[u8]) -> Result<Vec<u8>>;

/// The most a stored variant may weigh to be read: variants are at most 2048x2048, and a
/// PNG of that size with 4 channels is 16 MiB even uncompressed.
pub const MAX_VARIANT_BYTES: u64 = 32 << 20;

/// What a sibling's path is answered with.
#[derive(Debug, PartialEq)]
pub enum Sibling {
    /// The sibling, made and stored now.
    Made(Bytes),
    /// No sibling can exist there: the path is not a sibling's, or its variant is not
    /// stored (never uploaded, or deleted, also while the sibling was being made).
    Missing,
    /// The variant could not be encoded (logged): it is answered as it is, so the viewer
    /// still gets the image in its original format.
    Variant {
        bytes: Bytes,
        content_type: &'static str,
    },
}

/// Built once per cold start (or once by `sitehost serve`).
pub struct WebpSiblings {
    files: SharedFiles,
    encode: SiblingEncoder,
    /// Encodings run on the blocking pool, at most one per core at a time.
    encoding: Semaphore,
}

impl WebpSiblings {
    pub fn new(files: SharedFiles, encode: SiblingEncoder) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        WebpSiblings {
            files,
            encode,
            encoding: Semaphore::new(cores),
        }
    }

    /// Makes and stores the sibling at `sibling_path` (a stored path, no leading slash),
    /// or says why there is none. An error is a file store failure before anything was made.
    pub async fn make(&self, sibling_path: &str) -> Result<Sibling> {
        let Some(variant) = variant_of_webp_sibling(sibling_path)
            .filter(|_| sibling_path.starts_with(crate::image_record::UPLOAD_PREFIX))
        else {
            return Ok(Sibling::Missing);
        };
        let Some(bytes) = self.files.read(variant, MAX_VARIANT_BYTES).await? else {
            return Ok(Sibling::Missing);
        };
        let encoded = {
            let _permit = self.encoding.acquire().await;
            let (encode, input) = (self.encode, bytes.clone());
            tokio::task::spawn_blocking(move || encode(&input)).await
        };
        let webp = match encoded {
            Ok(Ok(webp)) => Bytes::from(webp),
            Ok(Err(err)) => {
                tracing::warn!(variant, error = %error_chain(&err), "a variant's WebP sibling could not be made; the variant is answered");
                return Ok(fallback(variant, bytes));
            }
            Err(panicked) => {
                tracing::error!(variant, error = %panicked, "encoding a WebP sibling panicked; the variant is answered");
                return Ok(fallback(variant, bytes));
            }
        };
        if let Err(err) = self
            .files
            .put(sibling_path, webp.clone(), "image/webp")
            .await
        {
            // Still a good answer: a concurrent first request may have stored it first (the
            // embedded store never replaces a file), and otherwise the next one tries again.
            tracing::warn!(sibling_path, error = %error_chain(&err), "a WebP sibling made on request was not stored");
            return Ok(Sibling::Made(webp));
        }
        // A delete of the image may have removed its files while the sibling was made: then
        // the sibling just stored would outlive them.
        match self.files.exists(variant).await {
            Ok(true) => Ok(Sibling::Made(webp)),
            Ok(false) => {
                if let Err(err) = self.files.delete(sibling_path).await {
                    tracing::warn!(sibling_path, error = %error_chain(&err), "the sibling of a deleted variant was not removed; the sweeper will");
                }
                Ok(Sibling::Missing)
            }
            Err(err) => {
                tracing::warn!(variant, error = %error_chain(&err), "could not check that a variant outlived its sibling's making; the sweeper removes an orphan");
                Ok(Sibling::Made(webp))
            }
        }
    }
}

fn fallback(variant: &str, bytes: Bytes) -> Sibling {
    Sibling::Variant {
        bytes,
        content_type: content_type_of(variant),
    }
}

#[cfg(all(test, feature = "local"))]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::error::ApiError;
    use crate::local::disk_files::LocalFiles;

    /// Stands in for the pipeline (tested in `upload::pipeline`): `webp:` and the variant's
    /// bytes. A variant whose bytes are `vanish:<file>` removes that file while it is
    /// encoded (an image deleted meanwhile); `bad` ones cannot be encoded.
    fn fake_webp(variant: &[u8]) -> Result<Vec<u8>> {
        if let Some(file) = variant.strip_prefix(b"vanish:") {
            let file = std::str::from_utf8(file).map_err(ApiError::internal)?;
            std::fs::remove_file(file).map_err(ApiError::internal)?;
        }
        if variant.starts_with(b"bad") {
            return Err(ApiError::internal("not an image"));
        }
        Ok([&b"webp:"[..], variant].concat())
    }

    async fn store_with(files: &[(&str, &str)]) -> (tempfile::TempDir, SharedFiles) {
        let dir = tempfile::tempdir().expect("dir");
        let store: SharedFiles = Arc::new(LocalFiles::open(dir.path()).expect("files"));
        for (path, bytes) in files {
            let bytes = bytes.replace("{dir}", &dir.path().display().to_string());
            store.put(path, Bytes::from(bytes), "x").await.expect("put");
        }
        (dir, store)
    }

    #[tokio::test]
    async fn a_sibling_is_made_once_from_its_stored_variant() {
        let (_dir, files) = store_with(&[("img/upload/a--1.big.png", "big png")]).await;
        let siblings = WebpSiblings::new(Arc::clone(&files), fake_webp);
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

    #[tokio::test]
    async fn paths_that_name_no_stored_variant_make_nothing() {
        let (dir, files) = store_with(&[
            ("img/upload/a--1.jpg", "original"),
            ("img/upload/a--1.small.webp", "a webp variant"),
            ("elsewhere/a--1.small.jpg", "not an upload"),
        ])
        .await;
        let siblings = WebpSiblings::new(files, fake_webp);
        for path in [
            "img/upload/a--1.jpg.webp",
            "img/upload/a--1.small.webp.webp",
            "elsewhere/a--1.small.jpg.webp",
            "img/upload/a--1.large.jpg.webp",
            "img/upload/a--1.large.jpg",
            "img/upload/../a--1.small.jpg.webp",
            "",
        ] {
            assert_eq!(
                siblings.make(path).await.expect("answered"),
                Sibling::Missing,
                "{path}"
            );
        }
        let mut stored: Vec<_> = walk(&dir.path().join("files"));
        stored.sort();
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
        let (_dir, files) = store_with(&[("img/upload/a--1.medium.gif", "bad gif")]).await;
        let siblings = WebpSiblings::new(Arc::clone(&files), fake_webp);
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
    }

    #[tokio::test]
    async fn a_sibling_of_an_image_deleted_meanwhile_is_removed_again() {
        let (_dir, files) = store_with(&[(
            "img/upload/a--1.large.jpg",
            "vanish:{dir}/files/img/upload/a--1.large.jpg",
        )])
        .await;
        let siblings = WebpSiblings::new(Arc::clone(&files), fake_webp);
        let answer = siblings.make("img/upload/a--1.large.jpg.webp").await;
        assert_eq!(answer.expect("answered"), Sibling::Missing);
        let exists = files.exists("img/upload/a--1.large.jpg.webp").await;
        assert!(!exists.expect("exists"), "no orphan sibling");
    }

    #[tokio::test]
    async fn a_variant_too_large_to_be_one_is_refused() {
        let (_dir, files) = store_with(&[]).await;
        let big = Bytes::from(vec![
            0u8;
            usize::try_from(MAX_VARIANT_BYTES).expect("fits") + 1
        ]);
        files
            .put("img/upload/a--1.big.png", big, "image/png")
            .await
            .expect("put");
        let siblings = WebpSiblings::new(files, fake_webp);
        assert!(siblings.make("img/upload/a--1.big.png.webp").await.is_err());
    }

    fn walk(dir: &std::path::Path) -> Vec<String> {
        let mut found = Vec::new();
        let mut dirs = vec![dir.to_path_buf()];
        while let Some(at) = dirs.pop() {
            for entry in std::fs::read_dir(&at).expect("read_dir") {
                let path = entry.expect("entry").path();
                if path.is_dir() {
                    dirs.push(path);
                } else {
                    let relative = path.strip_prefix(dir).expect("under dir");
                    found.push(relative.display().to_string());
                }
            }
        }
        found
    }
}
