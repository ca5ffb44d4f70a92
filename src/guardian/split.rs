//! `handle` in two halves, for a caller that decodes on one thread and decides on another
//! (`warden replay` reads and decodes the next lines while the current one is decided).
//! Decoding reads nothing of the Guardian's state, so the halves give the same answers, in
//! the same order, as [`Guardian::handle_response`].

use serde_json::Value;

use super::{is_known_method, too_large, Guardian};
use crate::acs::envelope::{self, DecodeOptions, Id, Request, Response};

/// A request line decoded, or the error response it gets without a decision.
pub type Decoded = Result<(Request, Value), Box<Response>>;

impl Guardian {
    /// The first half of [`Guardian::handle_response`]: the size bound, the JSON parse and
    /// the envelope checks.
    pub fn decode(&self, bytes: &[u8]) -> Decoded {
        let max = self.options.protocol.caps.max_envelope_bytes;
        if bytes.len() > max {
            return Err(Box::new(Response::error(
                Id::Null,
                too_large(bytes.len(), max),
            )));
        }
        let known = |m: &str| is_known_method(m);
        let opts = DecodeOptions {
            known_method: Some(&known),
            limits: crate::acs::json::Limits {
                max_bytes: max,
                ..Default::default()
            },
        };
        envelope::decode_request_with(bytes, &opts)
    }

    /// The second half: the decision on a request [`Guardian::decode`] gave.
    pub fn handle_decoded(&self, decoded: Decoded) -> Response {
        match decoded {
            Ok((req, raw)) => self.process(&req, Some(&raw)).0.wait(),
            Err(resp) => self.ready(*resp).wait(),
        }
    }
}
