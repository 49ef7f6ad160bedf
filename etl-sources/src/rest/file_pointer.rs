//! The JSON Pointers a pipeline file names (`records`, `id`,
//! `updated_at`, `primary_key`, ...), read with the place of a problem in
//! the file: below the file's sections, which all read them.

use toml::Spanned;

use super::error::{ConfigError, Locator};
use super::pointer::Pointer;

/// The JSON Pointer `value` of `key`.
pub(super) fn pointer(
    value: &Spanned<String>,
    key: &str,
    at: &Locator<'_>,
) -> Result<Pointer, ConfigError> {
    Pointer::parse(value.get_ref()).map_err(|e| at.key(value.span(), key, &e))
}

/// A pointer to a value inside a record: `""` (the whole record) would
/// reject every record, so it is refused.
pub(super) fn in_record(
    value: &Spanned<String>,
    key: &str,
    at: &Locator<'_>,
) -> Result<Pointer, ConfigError> {
    if value.get_ref().is_empty() {
        return Err(at.key(
            value.span(),
            key,
            "is the whole record (\"\"): point at a value inside it, such as \"/id\"",
        ));
    }
    pointer(value, key, at)
}
