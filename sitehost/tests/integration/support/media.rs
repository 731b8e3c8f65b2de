//! Images the tests make themselves, and a one-file HTTP server for `external_url` uploads.

use std::io::Cursor;
use std::path::Path;

use base64::Engine;

pub fn png(width: u32, height: u32) -> Vec<u8> {
    let img = image::RgbaImage::from_fn(width, height, |x, y| {
        image::Rgba([(x % 256) as u8, (y % 256) as u8, 128, 200])
    });
    let mut out = Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Png)
        .expect("png");
    out.into_inner()
}

pub fn jpeg(width: u32, height: u32) -> Vec<u8> {
    let img = image::RgbImage::from_fn(width, height, |x, y| {
        image::Rgb([(x % 256) as u8, (y % 256) as u8, 60])
    });
    let mut out = Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Jpeg)
        .expect("jpeg");
    out.into_inner()
}

pub fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The files of an embedded store's data directory (variants included), relative to
/// `files/`, sorted.
pub fn stored_files(dir: &Path) -> Vec<String> {
    let root = dir.join("files");
    let mut found = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(relative) = path.strip_prefix(&root) {
                found.push(relative.display().to_string());
            }
        }
    }
    found.sort();
    found
}

/// Serves `body` with `content_type` to every request on a loopback port; returns
/// `host:port` (to allowlist for the fetcher).
pub async fn file_server(body: Vec<u8>, content_type: &'static str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let body = body.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let _ = stream.read(&mut buf).await;
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(head.as_bytes()).await;
                let _ = stream.write_all(&body).await;
            });
        }
    });
    addr.to_string()
}

/// A file store that fails writing every path containing `fails` (after a pause, so the
/// other files of the upload land first and the cleanup has something to remove).
pub struct FailingFiles {
    inner: sitehost::store::files::SharedFiles,
    fails: &'static str,
}

impl FailingFiles {
    pub fn new(inner: sitehost::store::files::SharedFiles, fails: &'static str) -> Self {
        FailingFiles { inner, fails }
    }
}

#[async_trait::async_trait]
impl sitehost::store::files::FileStore for FailingFiles {
    async fn put(
        &self,
        path: &str,
        bytes: bytes::Bytes,
        content_type: &str,
    ) -> sitehost::Result<()> {
        if path.contains(self.fails) {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            return Err(sitehost::ApiError::internal("injected put failure"));
        }
        self.inner.put(path, bytes, content_type).await
    }

    async fn delete(&self, path: &str) -> sitehost::Result<()> {
        self.inner.delete(path).await
    }
}
