//! A request body read at no less than a minimum pace: after a grace period, a body must
//! have arrived at [`MIN_BYTES_PER_SEC`] on average, and all of it within an absolute
//! deadline. A client trickling a byte every few seconds holds a connection for the grace
//! period, not for the whole body deadline. A body not yet signed (an unsigned form body
//! read before its signature is checked, a staged form) gets the short deadline
//! [`UNSIGNED_BODY_TIMEOUT`].

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::Stream;
use hyper::body::{Body, Incoming};
use tokio::time::{Instant, Sleep};

/// How long a body may take before its pace counts.
pub const GRACE: Duration = Duration::from_secs(5);

/// The average pace a body must keep after [`GRACE`]: 16 KiB/s, a tenth of a slow mobile
/// uplink's.
pub const MIN_BYTES_PER_SEC: u64 = 16 * 1024;

/// The whole time a form body may take to arrive before its signature is checked: it holds
/// at most `params::MAX_FORM_BODY_BYTES` (64 KiB).
pub const UNSIGNED_BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a paced body stopped.
#[derive(Debug, thiserror::Error)]
pub enum PaceError {
    #[error("the body did not arrive within {0:?}")]
    Deadline(Duration),
    #[error("the body arrived slower than {MIN_BYTES_PER_SEC} bytes a second")]
    TooSlow,
    #[error("the body could not be read")]
    Read(#[source] hyper::Error),
}

impl PaceError {
    /// The 408 a client is answered.
    pub fn to_api(&self, what: &str) -> crate::error::ApiError {
        crate::error::ApiError::RequestTimeout(match self {
            PaceError::Deadline(limit) => {
                format!("{what} was not received within {} s.", limit.as_secs_f64())
            }
            _ => format!(
                "{what} arrived slower than {} KiB a second; send it at once.",
                MIN_BYTES_PER_SEC / 1024
            ),
        })
    }
}

/// How long after its start a body that has sent `received` bytes may take for the next.
fn allowed(received: u64, limit: Duration) -> Duration {
    let bought = Duration::from_secs_f64(received as f64 / MIN_BYTES_PER_SEC as f64);
    (GRACE + bought).min(limit)
}

/// The data frames of a body, failing with [`PaceError`] once it falls behind its pace.
pub struct PacedBody {
    body: Incoming,
    started: Instant,
    limit: Duration,
    received: u64,
    timer: Pin<Box<Sleep>>,
}

impl PacedBody {
    /// `limit`: the absolute deadline, from now.
    pub fn new(body: Incoming, limit: Duration) -> Self {
        let started = Instant::now();
        let mut paced = PacedBody {
            body,
            started,
            limit,
            received: 0,
            timer: Box::pin(tokio::time::sleep_until(started)),
        };
        let due = paced.due();
        paced.timer.as_mut().reset(due);
        paced
    }

    /// When the next bytes are due: the grace plus the time the bytes so far buy at the
    /// minimum pace, and never past the absolute deadline.
    fn due(&self) -> Instant {
        self.started + allowed(self.received, self.limit)
    }

    fn late(&self) -> PaceError {
        if self.due() >= self.started + self.limit {
            PaceError::Deadline(self.limit)
        } else {
            PaceError::TooSlow
        }
    }
}

impl Stream for PacedBody {
    type Item = Result<Bytes, PaceError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            match Pin::new(&mut self.body).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    let Ok(data) = frame.into_data() else {
                        continue; // trailers
                    };
                    self.received += data.len() as u64;
                    let due = self.due();
                    self.timer.as_mut().reset(due);
                    return Poll::Ready(Some(Ok(data)));
                }
                Poll::Ready(Some(Err(err))) => return Poll::Ready(Some(Err(PaceError::Read(err)))),
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => {
                    return match self.timer.as_mut().poll(cx) {
                        Poll::Ready(()) => Poll::Ready(Some(Err(self.late()))),
                        Poll::Pending => Poll::Pending,
                    };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_body_falls_due_at_the_grace_plus_what_it_sent_bought() {
        let bought = allowed;
        let long = Duration::from_secs(60);
        assert_eq!(bought(0, long), GRACE);
        assert_eq!(
            bought(MIN_BYTES_PER_SEC * 10, long),
            GRACE + Duration::from_secs(10)
        );
        // A 64 KiB unsigned form at the minimum pace still makes the unsigned deadline.
        let form = 64 * 1024;
        assert!(bought(form, long) <= UNSIGNED_BODY_TIMEOUT);
        assert_eq!(bought(u64::MAX / 2, long), long);
    }
}
