//! What the validation's unit tests share. Test code only.

use crate::problem::ApiError;

/// The detail of the 400 `validate` gives for `input`.
pub(super) fn refusal<T: std::fmt::Debug>(result: Result<T, ApiError>) -> String {
    let e = result.expect_err("refused");
    assert_eq!(e.status.as_u16(), 400, "{e}");
    e.detail
}
