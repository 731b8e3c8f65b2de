//! Staged uploads' sessions: recorded, read back, used once (also when two creates race),
//! made usable again, and gone once past their keeping.

use sitehost::store::{SharedStore, UploadSession, UPLOAD_SESSION_KEPT_SECS};

const NOW: i64 = 1_700_000_000;

fn session(upload_id: &str, partner_sub_id: Option<&str>) -> UploadSession {
    UploadSession {
        upload_id: upload_id.into(),
        account_id: 7,
        partner_sub_id: partner_sub_id.map(str::to_string),
        name: "IMG_2040.jpg".into(),
        size: 5_508_789,
        expires_at: NOW + 900,
        used: false,
    }
}

pub async fn an_upload_session_is_used_once_and_kept_a_day_past_its_expiry(store: SharedStore) {
    let a = session("0123456789abcdef0123456789abcdef", Some("sub-1"));
    let b = session("fedcba9876543210fedcba9876543210", None);
    store.create_upload_session(&a, NOW).await.expect("create");
    store.create_upload_session(&b, NOW).await.expect("create");
    let read = |id: &'static str, now| {
        let store = store.clone();
        async move { store.get_upload_session(id, now).await.expect("get") }
    };
    assert_eq!(
        read("0123456789abcdef0123456789abcdef", NOW).await,
        Some(a.clone())
    );
    assert_eq!(
        read("fedcba9876543210fedcba9876543210", NOW).await,
        Some(b.clone())
    );
    assert_eq!(read("00000000000000000000000000000000", NOW).await, None);

    // Used once: the second use is refused, and the record says so.
    assert!(store.use_upload_session(&a.upload_id).await.expect("use"));
    assert!(!store.use_upload_session(&a.upload_id).await.expect("use"));
    let used = read("0123456789abcdef0123456789abcdef", NOW + 1).await;
    assert_eq!(used.map(|s| s.used), Some(true));
    // Released after a failure of ours, it can be used again (once).
    store
        .release_upload_session(&a.upload_id)
        .await
        .expect("release");
    assert!(store.use_upload_session(&a.upload_id).await.expect("use"));
    assert!(!store
        .use_upload_session("00000000000000000000000000000000")
        .await
        .expect("use"));

    // Two creates at once: one of them uses it.
    let (first, second) = tokio::join!(
        store.use_upload_session(&b.upload_id),
        store.use_upload_session(&b.upload_id)
    );
    assert_eq!(
        [first.expect("use"), second.expect("use")]
            .iter()
            .filter(|u| **u)
            .count(),
        1
    );

    // Kept a day past the form's expiry, then gone.
    let kept_until = a.expires_at + UPLOAD_SESSION_KEPT_SECS;
    assert!(read("0123456789abcdef0123456789abcdef", kept_until - 1)
        .await
        .is_some());
    assert_eq!(
        read("0123456789abcdef0123456789abcdef", kept_until).await,
        None
    );
}
